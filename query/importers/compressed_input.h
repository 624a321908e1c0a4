// A RapidJSON input stream over a file that may be gzip-compressed: zlib's gzread decompresses
// .gz transparently and passes plain files through, so one reader serves both. The file is read
// in fixed-size chunks; it is never held in memory whole.
#ifndef MEMTRACE_QUERY_IMPORTERS_COMPRESSED_INPUT_H_
#define MEMTRACE_QUERY_IMPORTERS_COMPRESSED_INPUT_H_

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace memtrace::importers {

class CompressedInput {
 public:
  // Called after each chunk is read with (compressed bytes consumed so far, file size).
  using ProgressFn = std::function<void(uint64_t consumed, uint64_t total)>;

  // Opens `path`. NOT_FOUND / PERMISSION_DENIED / FAILED_PRECONDITION (a directory) name the
  // file and the system's reason.
  static absl::StatusOr<std::unique_ptr<CompressedInput>> Open(const std::string& path,
                                                               size_t chunk_bytes = 1 << 18);
  // Use Open(); the token keeps construction private while allowing std::make_unique.
  class Token {
    friend class CompressedInput;
    Token() = default;
  };
  CompressedInput(Token, std::string path, gzFile file, uint64_t file_bytes, size_t chunk_bytes);
  ~CompressedInput();
  CompressedInput(const CompressedInput&) = delete;
  CompressedInput& operator=(const CompressedInput&) = delete;

  void set_progress(ProgressFn progress) { progress_ = std::move(progress); }

  // RapidJSON's input stream concept. After the end of the data (or a read error) Peek() and
  // Take() return '\0', which RapidJSON reports as a parse error at that offset.
  using Ch = char;
  Ch Peek() const { return cur_ != end_ ? *cur_ : '\0'; }
  Ch Take() {
    if (cur_ == end_) return '\0';
    Ch c = *cur_++;
    if (cur_ == end_) Refill();
    return c;
  }
  size_t Tell() const { return consumed_before_ + static_cast<size_t>(cur_ - buffer_.data()); }
  // Writing is not supported; RapidJSON's reader never calls these for an input stream.
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }

  const std::string& path() const { return path_; }
  // Whether the file is gzip data (as opposed to plain text passed through).
  bool compressed() const { return compressed_; }
  uint64_t file_bytes() const { return file_bytes_; }
  // Compressed bytes consumed so far (equals the decompressed count for plain files).
  uint64_t compressed_offset() const;
  // OK, or DATA_LOSS naming the file, the compressed offset and zlib's message when the data
  // ended early or was corrupt (a truncated .gz).
  const absl::Status& read_status() const { return read_status_; }

 private:
  void Refill();

  std::string path_;
  gzFile file_;
  uint64_t file_bytes_;
  bool compressed_ = false;
  std::vector<char> buffer_;
  const char* cur_ = nullptr;
  const char* end_ = nullptr;
  size_t consumed_before_ = 0;  // decompressed bytes in earlier chunks
  absl::Status read_status_;
  ProgressFn progress_;
};

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_COMPRESSED_INPUT_H_
