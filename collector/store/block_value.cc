#include "collector/store/block_value.h"

#include <lz4.h>

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace memtrace::collector {

namespace {

constexpr char kCompressed = '\0';
// The largest batch the collector accepts is far below this; anything larger is damage.
constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

}  // namespace

absl::string_view CompressBlock(absl::string_view batch, std::string* scratch) {
  const int bound = LZ4_compressBound(static_cast<int>(batch.size()));
  const size_t most = 1 + 10 + static_cast<size_t>(bound);  // marker, size varint, LZ4 block
  if (scratch->size() < most) scratch->resize(most);
  char* const out = scratch->data();
  size_t header = 0;
  out[header++] = kCompressed;
  uint64_t size = batch.size();
  do {
    out[header++] = static_cast<char>((size & 0x7f) | (size >= 0x80 ? 0x80 : 0));
    size >>= 7;
  } while (size != 0);
  const int written = LZ4_compress_default(batch.data(), out + header,
                                           static_cast<int>(batch.size()), bound);
  return absl::string_view(out, header + static_cast<size_t>(written));
}

absl::StatusOr<absl::string_view> BlockBatchBytes(absl::string_view value, std::string* scratch) {
  if (value.empty() || value[0] != kCompressed) return value;  // stored uncompressed
  uint64_t size = 0;
  size_t i = 1;
  for (int shift = 0;; shift += 7) {
    if (i >= value.size() || shift > 35) {
      return absl::DataLossError("compressed block has a damaged size");
    }
    const uint8_t b = static_cast<uint8_t>(value[i++]);
    size |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) break;
  }
  if (size > kMaxBlockBytes) {
    return absl::DataLossError(absl::StrCat("compressed block claims ", size, " bytes"));
  }
  scratch->resize(size);
  const int got = LZ4_decompress_safe(value.data() + i, scratch->data(),
                                      static_cast<int>(value.size() - i), static_cast<int>(size));
  if (got != static_cast<int>(size)) {
    return absl::DataLossError(absl::StrCat("compressed block of ", value.size(),
                                            " bytes does not decompress to its ", size, " bytes"));
  }
  return absl::string_view(*scratch);
}

}  // namespace memtrace::collector
