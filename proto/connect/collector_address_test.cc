#include "proto/connect/collector_address.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace::connect {
namespace {

TEST(SplitHostPortTest, ReadsIpv4NamesAndBracketedIpv6) {
  EXPECT_EQ(*SplitHostPort("--listen", "0.0.0.0:0"), std::make_pair(std::string("0.0.0.0"), 0));
  EXPECT_EQ(*SplitHostPort("--listen", "[::1]:7431"), std::make_pair(std::string("[::1]"), 7431));
  EXPECT_EQ(*SplitHostPort("--listen", "head-node:65535"),
            std::make_pair(std::string("head-node"), 65535));
}

TEST(SplitHostPortTest, RefusesAddressesWithoutAUsablePortNamingThem) {
  for (const auto& [address, why] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1", "expected host:port"},
           {"127.0.0.1:", "expected host:port"},
           {":7431", "expected host:port"},
           {"[::1]", "expected host:port"},
           {"::1:7431", "write IPv6 hosts in brackets, e.g. [::1]:7431"},
           {"127.0.0.1:99999", "port must be 0..65535"},
           {"127.0.0.1:65536", "port must be 0..65535"},
           {"127.0.0.1:-1", "port must be 0..65535"},
           {"127.0.0.1:+80", "port must be 0..65535"},
           {"127.0.0.1:0x50", "port must be 0..65535"},
           {"127.0.0.1:000000080", "port must be 0..65535"},
           {"[]:80", "expected host:port"},
           {" 127.0.0.1:7431", "contains whitespace"},
       }) {
    absl::StatusOr<std::pair<std::string, int>> split = SplitHostPort("--listen", address);
    ASSERT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_EQ(split.status().message(), "--listen='" + address + "': " + why);
  }
}

TEST(CheckCollectorAddressTest, AcceptsHostPortIpv6AndSchemedTargets) {
  for (const char* address :
       {"127.0.0.1:7431", "head:1", "[::1]:7431", "collector.example:443",
        "unix:/tmp/memtrace.sock", "dns:///c.example:1", "ipv4:10.0.0.1:80",
        "dns:c.svc.cluster.local:7431", "unix-abstract:memtrace", "vsock:3:7431", "dns:7431"}) {
    EXPECT_TRUE(CheckCollectorAddress("--collector", address).ok()) << address;
  }
}

TEST(CheckCollectorAddressTest, RefusesWhatGrpcWouldDialOnTheWrongPort) {
  for (const auto& [address, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "empty (expected host:port)"},
           {"127.0.0.1", "expected host:port"},
           {"127.0.0.1:99999", "port must be 1..65535"},
           {"127.0.0.1:0", "port must be 1..65535"},
           {":-1", "expected host:port"},
           {"host :1", "contains whitespace"},
       }) {
    absl::Status s = CheckCollectorAddress("--collector", address);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_EQ(s.message(), "--collector='" + address + "': " + why);
  }
}

}  // namespace
}  // namespace memtrace::connect
