// Renders `memtrace plot`'s SVG of a simulated leak job in headless Chromium and checks the
// screenshot is a real picture: it decodes, has many colours, and shows the highlighted rank's
// red line. (Which rank is highlighted is asserted on the SVG's data in plot_command_test.)
// Tagged "chromium": bazel test --test_tag_filters=chromium //query/export/...
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "query/export/plot_command.h"
#include "query/export/png_reader.h"
#include "query/export/simulated_job.h"
#include "query/export/svg_test_util.h"
#include "tests/util/test_dirs.h"

extern char** environ;

namespace memtrace::exporter {
namespace {

constexpr char kChromium[] = "/usr/bin/chromium";

// Runs argv with a wall-clock limit; returns the exit status, or -1 when it had to be killed.
int RunWithTimeout(const std::vector<std::string>& argv, std::chrono::seconds limit) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -2;
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

TEST(SvgScreenshotTest, ChromiumRendersTheLeakPlotWithTheHighlightedLine) {
  if (access(kChromium, X_OK) != 0) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && *ci != '\0' && std::string(ci) != "false") {
      FAIL() << kChromium << " is missing (tools/setup.sh installs Debian's chromium)";
    }
    GTEST_SKIP() << kChromium << " is not installed";
  }
  sim::SimulationOptions leak = testing::SmallJob("sim-leak-shot", 8, 40, 2000);
  leak.workload.leak_rank = 2;
  leak.workload.leak_from_step = 15;
  auto server = testing::SimulateJob("screenshot_sim", leak);
  ASSERT_NE(server, nullptr);

  const std::string dir = test_util::TmpDir();
  const std::string svg_path = dir + "/leak.svg";
  std::ostringstream out, err;
  cli::CommandIo io{out, err};
  ASSERT_EQ(PlotCommand().run(
                {"--job", "sim-leak-shot", "-o", svg_path, "--collector", server->address()}, io),
            0)
      << err.str();
  std::ifstream svg_in(svg_path);
  std::string svg((std::istreambuf_iterator<char>(svg_in)), {});
  ASSERT_EQ(testing::Root(svg)["data-highlighted-rank"], "2");

  const std::string png_path = dir + "/leak.png";
  const std::string profile = dir + "/chromium-profile";
  mkdir(profile.c_str(), 0700);
  // HOME inside the sandbox may not be writable; Chromium keeps its caches there.
  setenv("HOME", dir.c_str(), 1);
  auto start = std::chrono::steady_clock::now();
  int code = RunWithTimeout(
      {kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
       "--disable-background-networking", "--disable-component-update", "--disable-sync",
       "--disable-dev-shm-usage", "--user-data-dir=" + profile, "--screenshot=" + png_path,
       "--window-size=1200,800", "file://" + svg_path},
      std::chrono::seconds(25));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(code, 0) << "chromium exit " << code << " after " << seconds << " s";
  EXPECT_LT(seconds, 30);

  absl::StatusOr<RgbImage> png = ReadPng(png_path);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(png->width, 1200u);
  EXPECT_EQ(png->height, 800u);
  std::set<uint32_t> colors(png->pixels.begin(), png->pixels.end());
  EXPECT_GT(colors.size(), 10u) << "a blank screenshot";
  size_t red = 0, white = 0;
  for (uint32_t p : png->pixels) {
    red += p == 0xD62728;  // the highlighted rank's stroke
    white += p == 0xFFFFFF;
  }
  EXPECT_GT(red, 200u) << "the highlighted line is not visible";
  EXPECT_GT(white, png->pixels.size() / 2) << "the background is not the plot's";
}

}  // namespace
}  // namespace memtrace::exporter
