#include "query/export/png_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace memtrace::exporter {
namespace {

uint32_t Be32(absl::string_view d, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(d[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(d[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(d[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(d[at + 3]));
}

uint8_t Paeth(int a, int b, int c) {
  int p = a + b - c;
  int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

}  // namespace

absl::StatusOr<RgbImage> DecodePng(absl::string_view data) {
  constexpr absl::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  if (data.size() < 8 || data.substr(0, 8) != kSignature) {
    return absl::InvalidArgumentError("not a PNG: bad signature");
  }
  RgbImage image;
  int channels = 0;
  std::string idat;
  bool saw_header = false, saw_end = false;
  for (size_t at = 8; at + 12 <= data.size();) {
    uint32_t length = Be32(data, at);
    absl::string_view type = data.substr(at + 4, 4);
    if (at + 12 + length > data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("PNG chunk ", type, " runs past the end"));
    }
    absl::string_view body = data.substr(at + 8, length);
    if (type == "IHDR") {
      if (length != 13) return absl::InvalidArgumentError("PNG IHDR has the wrong size");
      image.width = Be32(body, 0);
      image.height = Be32(body, 4);
      uint8_t depth = body[8], color = body[9], interlace = body[12];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unsupported PNG: bit depth ", depth, ", colour type ", color, ", interlace ",
            interlace, " (only 8-bit RGB/RGBA, not interlaced)"));
      }
      channels = color == 2 ? 3 : 4;
      if (image.width == 0 || image.height == 0 || image.width > 20000 || image.height > 20000) {
        return absl::InvalidArgumentError("PNG size out of range");
      }
      saw_header = true;
    } else if (type == "IDAT") {
      idat.append(body.data(), body.size());
    } else if (type == "IEND") {
      saw_end = true;
      break;
    }
    at += 12 + length;
  }
  if (!saw_header || !saw_end) return absl::InvalidArgumentError("PNG without IHDR or IEND");

  const size_t stride = static_cast<size_t>(image.width) * channels;
  std::string raw((stride + 1) * image.height, '\0');
  uLongf raw_size = raw.size();
  int z = uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                     reinterpret_cast<const Bytef*>(idat.data()), idat.size());
  if (z != Z_OK || raw_size != raw.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PNG image data does not inflate (zlib ", z,
                                                   ", ", raw_size, " of ", raw.size(), " bytes)"));
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  image.pixels.resize(static_cast<size_t>(image.width) * image.height);
  for (uint32_t y = 0; y < image.height; ++y) {
    const uint8_t* row = reinterpret_cast<const uint8_t*>(raw.data()) + y * (stride + 1);
    uint8_t filter = row[0];
    for (size_t i = 0; i < stride; ++i) {
      int x = row[1 + i];
      int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0;
      int b = prev[i];
      int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      switch (filter) {
        case 0: break;
        case 1: x += a; break;
        case 2: x += b; break;
        case 3: x += (a + b) / 2; break;
        case 4: x += Paeth(a, b, c); break;
        default:
          return absl::InvalidArgumentError(absl::StrCat("PNG row ", y, ": unknown filter ", filter));
      }
      cur[i] = static_cast<uint8_t>(x);
    }
    for (uint32_t px = 0; px < image.width; ++px) {
      const uint8_t* p = &cur[static_cast<size_t>(px) * channels];
      image.pixels[static_cast<size_t>(y) * image.width + px] =
          (static_cast<uint32_t>(p[0]) << 16) | (static_cast<uint32_t>(p[1]) << 8) | p[2];
    }
    prev.swap(cur);
  }
  return image;
}

absl::StatusOr<RgbImage> ReadPng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string data((std::istreambuf_iterator<char>(in)), {});
  absl::StatusOr<RgbImage> image = DecodePng(data);
  if (!image.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", image.status().message()));
  return image;
}

}  // namespace memtrace::exporter
