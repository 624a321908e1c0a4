#include "query/importers/progress_bar.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace memtrace::importers {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  int c;
  while ((c = std::fgetc(f)) != EOF) out.push_back(static_cast<char>(c));
  return out;
}

TEST(ProgressBarTest, RendersFractionAndMebibytes) {
  std::string text = ProgressBar::Render("rank0.json", 15 << 20, 30 << 20);
  EXPECT_NE(text.find("rank0.json"), std::string::npos);
  EXPECT_NE(text.find("[###############...............]"), std::string::npos) << text;
  EXPECT_NE(text.find(" 50%"), std::string::npos);
  EXPECT_NE(text.find("15.0/30.0 MiB"), std::string::npos);
}

TEST(ProgressBarTest, DrawsInPlaceOnATerminalAndErasesItself) {
  std::FILE* f = std::tmpfile();
  absl::Time t0 = absl::Now();
  {
    ProgressBar bar(f, /*enabled=*/true, "big.json", absl::ZeroDuration(), absl::Milliseconds(100));
    bar.Update(10, 100, t0 + absl::Seconds(1));
    bar.Update(20, 100, t0 + absl::Seconds(1) + absl::Milliseconds(10));  // too soon: skipped
    bar.Update(90, 100, t0 + absl::Seconds(2));
    EXPECT_TRUE(bar.drawn());
  }
  std::string out = Contents(f);
  EXPECT_NE(out.find(" 10%"), std::string::npos);
  EXPECT_EQ(out.find(" 20%"), std::string::npos);
  EXPECT_NE(out.find(" 90%"), std::string::npos);
  EXPECT_EQ(out.substr(out.size() - 4), "\r\033[K");  // cleared at the end
  std::fclose(f);
}

TEST(ProgressBarTest, PrintsNothingWhenNotATerminalOrTheFileIsQuick) {
  std::FILE* f = std::tmpfile();
  {
    ProgressBar off(f, /*enabled=*/false, "x", absl::ZeroDuration());
    off.Update(1, 2, absl::Now() + absl::Seconds(5));
    ProgressBar quick(f, /*enabled=*/true, "y", absl::Seconds(10));
    quick.Update(1, 2);  // before the delay
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace memtrace::importers
