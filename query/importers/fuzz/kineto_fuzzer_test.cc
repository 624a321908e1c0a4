// Runs the fuzz target's checks in the normal build (no libFuzzer): each seed trace whole,
// every prefix of it (a trace cut off mid-write), every single-byte change, and hand-made
// hostile values. A violated promise aborts the test.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int Feed(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator("query/importers/fuzz/seeds")) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    seeds.push_back(text.str());
  }
  return seeds;
}

TEST(KinetoFuzzerTest, TheSeedsAreThere) { EXPECT_EQ(Seeds().size(), 4u); }

TEST(KinetoFuzzerTest, EveryPrefixOfEverySeedKeepsThePromises) {
  for (const std::string& seed : Seeds()) {
    for (size_t n = 0; n <= seed.size(); ++n) EXPECT_EQ(Feed(seed.substr(0, n)), 0);
  }
}

TEST(KinetoFuzzerTest, EverySingleByteChangeKeepsThePromises) {
  for (const std::string& seed : Seeds()) {
    for (size_t i = 0; i < seed.size(); ++i) {
      for (char v : {'\0', '"', '-', '9', '{', ']', '\xff'}) {
        std::string mutated = seed;
        mutated[i] = v;
        EXPECT_EQ(Feed(mutated), 0);
      }
    }
  }
}

TEST(KinetoFuzzerTest, HostileValuesKeepThePromises) {
  const std::string memory_event =
      R"({"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": TS,)"
      R"( "args": {"Total Allocated": TOTAL, "Bytes": BYTES, "Addr": 16, "Device Id": DEV,)"
      R"( "Device Type": 1}}], "baseTimeNanoseconds": BASE})";
  const std::vector<std::vector<std::string>> cases = {
      {"1", "0", "-9223372036854775808", "0", "0"},
      {"1", "-9223372036854775808", "1", "0", "0"},
      {"9223372036854775.807", "1", "1", "0", "9223372036854775807"},
      {"-9223372036854775.808", "1", "1", "0", "-9223372036854775808"},
      {"1", "9223372036854775807", "-9223372036854775807", "-2147483648", "0"},
      {"1e400", "1", "1", "0", "0"},
  };
  for (const auto& c : cases) {
    std::string json = memory_event;
    for (auto [key, value] : {std::pair<std::string, std::string>{"TS", c[0]},
                              {"TOTAL", c[1]},
                              {"BYTES", c[2]},
                              {"DEV", c[3]},
                              {"BASE", c[4]}}) {
      json.replace(json.find(key), key.size(), value);
    }
    SCOPED_TRACE(json);
    EXPECT_EQ(Feed(json), 0);
  }
}

}  // namespace
