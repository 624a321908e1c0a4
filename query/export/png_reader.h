// A small PNG decoder for tests that check screenshots: 8-bit RGB or RGBA, non-interlaced (what
// Chromium's --screenshot writes), inflated with zlib and unfiltered per the PNG spec.
#ifndef MEMTRACE_QUERY_EXPORT_PNG_READER_H_
#define MEMTRACE_QUERY_EXPORT_PNG_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::exporter {

struct RgbImage {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint32_t> pixels;  // 0xRRGGBB, row by row (alpha dropped)

  uint32_t at(uint32_t x, uint32_t y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

// Decodes PNG file contents. INVALID_ARGUMENT naming what is wrong (signature, chunk, CRC-free
// structure, an unsupported colour type / bit depth / interlace, bad filter or zlib data).
absl::StatusOr<RgbImage> DecodePng(absl::string_view data);

// Reads and decodes the PNG at `path`.
absl::StatusOr<RgbImage> ReadPng(const std::string& path);

}  // namespace memtrace::exporter

#endif  // MEMTRACE_QUERY_EXPORT_PNG_READER_H_
