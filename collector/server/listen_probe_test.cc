#include "collector/server/listen_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace memtrace::collector {
namespace {

// A socket listening on 127.0.0.1 at a port the OS picked; closed when it goes.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), size) == 0 && listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~HeldPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ListenProbeTest, APortAnotherSocketListensOnIsInUse) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string listen = "127.0.0.1:" + std::to_string(held.port());
  absl::Status s = ProbeListenAddress(listen, "127.0.0.1", held.port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(),
            "cannot listen on " + listen + ": address already in use (another collector?)");
}

TEST(ListenProbeTest, AFreePortAndPortZeroAreFine) {
  int port = 0;
  {
    HeldPort released;
    port = released.port();
  }
  ASSERT_GT(port, 0);
  EXPECT_TRUE(ProbeListenAddress("x", "127.0.0.1", port).ok());
  EXPECT_TRUE(ProbeListenAddress("x", "localhost", port).ok());
  EXPECT_TRUE(ProbeListenAddress("x", "[::]", port).ok());
  EXPECT_TRUE(ProbeListenAddress("x", "0.0.0.0", port).ok());
  HeldPort held;
  EXPECT_TRUE(ProbeListenAddress("x", "127.0.0.1", 0).ok());
}

TEST(ListenProbeTest, AnAddressOfAnotherMachineOrNoneIsReported) {
  // 192.0.2.1 is TEST-NET-1: never an address of this machine.
  absl::Status s = ProbeListenAddress("192.0.2.1:7431", "192.0.2.1", 7431);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(), "cannot listen on 192.0.2.1:7431: cannot assign requested address");
  s = ProbeListenAddress("no-such-host.invalid:7431", "no-such-host.invalid", 7431);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), "cannot listen on no-such-host.invalid:7431: ")) << s;
}

}  // namespace
}  // namespace memtrace::collector
