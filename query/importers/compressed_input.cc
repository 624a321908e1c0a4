#include "query/importers/compressed_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace memtrace::importers {
namespace {

absl::Status OpenError(const std::string& path, int err) {
  std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::FailedPreconditionError(message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompressedInput>> CompressedInput::Open(const std::string& path,
                                                                       size_t chunk_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return OpenError(path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: is a directory"));
  }
  gzFile file = gzdopen(fd, "rb");  // owns fd from here on
  if (file == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(path, ": cannot open: zlib out of memory"));
  }
  gzbuffer(file, 1 << 17);
  auto input = std::make_unique<CompressedInput>(Token(), path, file,
                                                 static_cast<uint64_t>(st.st_size), chunk_bytes);
  input->Refill();
  return input;
}

CompressedInput::CompressedInput(Token, std::string path, gzFile file, uint64_t file_bytes,
                                 size_t chunk_bytes)
    : path_(std::move(path)), file_(file), file_bytes_(file_bytes) {
  buffer_.resize(chunk_bytes < 16 ? 16 : chunk_bytes);
  cur_ = end_ = buffer_.data();
}

CompressedInput::~CompressedInput() { gzclose(file_); }

uint64_t CompressedInput::compressed_offset() const {
  z_off_t offset = gzoffset(file_);
  return offset < 0 ? 0 : static_cast<uint64_t>(offset);
}

namespace {

// gzerror's message for a gzdopen'ed file starts with its made-up path, "<fd:3>: ", which says
// nothing to the user (the file's own path is in front already).
absl::string_view WithoutFdName(const char* message) {
  absl::string_view text(message == nullptr ? "" : message);
  if (absl::StartsWith(text, "<fd:")) {
    if (size_t end = text.find(">: "); end != absl::string_view::npos) text.remove_prefix(end + 3);
  }
  return text;
}

}  // namespace

void CompressedInput::Refill() {
  consumed_before_ += static_cast<size_t>(end_ - buffer_.data());
  cur_ = end_ = buffer_.data();
  if (!read_status_.ok()) return;
  int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  // gzdirect is only reliable after the first read has looked at the header.
  compressed_ = gzdirect(file_) == 0;
  if (n < 0) {
    int zerr = Z_OK;
    const char* message = gzerror(file_, &zerr);
    read_status_ = absl::DataLossError(
        absl::StrCat(path_, ": ", compressed_ ? "gzip data corrupt or truncated" : "read error",
                     " at compressed byte ", compressed_offset(), ": ",
                     zerr == Z_ERRNO ? std::strerror(errno) : WithoutFdName(message)));
    n = 0;
  } else if (n == 0 && compressed_) {
    // gzread returns 0 at a clean end, but also when the last member stops short; gzerror
    // says which (Z_BUF_ERROR: "unexpected end of file").
    int zerr = Z_OK;
    const char* message = gzerror(file_, &zerr);
    if (zerr != Z_OK) {
      read_status_ = absl::DataLossError(
          absl::StrCat(path_, ": gzip data corrupt or truncated at compressed byte ",
                       compressed_offset(), ": ", WithoutFdName(message)));
    }
  }
  end_ = buffer_.data() + n;
  if (progress_) progress_(compressed_offset(), file_bytes_);
}

}  // namespace memtrace::importers
