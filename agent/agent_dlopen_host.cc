// A process with no CUDA at all that loads the agent the way the CUDA driver does (dlopen, then
// dlsym "InitializeInjection" and call it) - for agent_dlopen_test.
//   agent_dlopen_host <libmemtrace_agent.so> <milliseconds to stay alive> [sigterm]
// Prints "init=<r1>,<r2>" (the two return values) on stdout and exits normally, so that the
// agent's atexit handler runs; with "sigterm", ends itself by SIGTERM instead, as a launcher
// ending a worker would.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::strcmp(argv[3], "sigterm") == 0)) {
    std::fprintf(stderr, "usage: %s LIB MILLISECONDS [sigterm]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 3;
  }
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr) {
    std::fprintf(stderr, "no InitializeInjection\n");
    return 4;
  }
  int first = init();
  int second = init();  // idempotent
  std::printf("init=%d,%d\n", first, second);
  std::fflush(stdout);
  usleep(static_cast<useconds_t>(std::atoi(argv[2])) * 1000);
  if (argc == 4) {
    kill(getpid(), SIGTERM);
    for (;;) pause();  // ended by SIGTERM, after the agent's drain
  }
  return 0;  // exit() runs the agent's atexit handler
}
