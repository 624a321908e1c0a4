#include "query/export/png_reader.h"

#include <zlib.h>

#include "gtest/gtest.h"

namespace memtrace::exporter {
namespace {

void Put32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xFF));
}

void Chunk(std::string* png, const std::string& type, const std::string& body) {
  Put32(png, body.size());
  std::string typed = type + body;
  png->append(typed);
  Put32(png, crc32(0, reinterpret_cast<const Bytef*>(typed.data()), typed.size()));
}

// A 3x2 RGB PNG whose rows use the Sub and Up filters.
std::string TinyPng() {
  // Pixels: row 0 red, green, blue; row 1 white, black, (10, 20, 30).
  std::string raw;
  raw += '\x01';  // Sub: each byte minus the byte one pixel to the left
  const uint8_t row0[] = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  for (int i = 0; i < 9; ++i) raw += static_cast<char>(row0[i] - (i >= 3 ? row0[i - 3] : 0));
  raw += '\x02';  // Up: each byte minus the byte above it
  const uint8_t row1[] = {255, 255, 255, 0, 0, 0, 10, 20, 30};
  for (int i = 0; i < 9; ++i) raw += static_cast<char>(row1[i] - row0[i]);
  std::string z(compressBound(raw.size()), '\0');
  uLongf z_size = z.size();
  compress(reinterpret_cast<Bytef*>(z.data()), &z_size,
           reinterpret_cast<const Bytef*>(raw.data()), raw.size());
  z.resize(z_size);
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  Put32(&ihdr, 3);
  Put32(&ihdr, 2);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  Chunk(&png, "IHDR", ihdr);
  Chunk(&png, "IDAT", z);
  Chunk(&png, "IEND", "");
  return png;
}

TEST(PngReaderTest, DecodesFilteredRgbRows) {
  absl::StatusOr<RgbImage> image = DecodePng(TinyPng());
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 3u);
  EXPECT_EQ(image->height, 2u);
  EXPECT_EQ(image->at(0, 0), 0xFF0000u);
  EXPECT_EQ(image->at(1, 0), 0x00FF00u);
  EXPECT_EQ(image->at(2, 0), 0x0000FFu);
  EXPECT_EQ(image->at(0, 1), 0xFFFFFFu);
  EXPECT_EQ(image->at(1, 1), 0x000000u);
  EXPECT_EQ(image->at(2, 1), 0x0A141Eu);
}

TEST(PngReaderTest, RejectsWhatIsNotAPng) {
  EXPECT_FALSE(DecodePng("GIF89a").ok());
  std::string cut = TinyPng();
  cut.resize(cut.size() - 20);
  EXPECT_FALSE(DecodePng(cut).ok());
}

}  // namespace
}  // namespace memtrace::exporter
