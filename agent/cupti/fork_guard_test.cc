#include "agent/cupti/fork_guard.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace memtrace::cupti {
namespace {

TEST(ForkGuardTest, OnlyAForkedChildIsMarked) {
  InstallForkGuard();
  InstallForkGuard();  // idempotent: one handler
  EXPECT_FALSE(InForkedChild());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(InForkedChild() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child did not see itself as forked";
  EXPECT_FALSE(InForkedChild()) << "the parent is not the child";
}

}  // namespace
}  // namespace memtrace::cupti
