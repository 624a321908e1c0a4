// Writes the seed batches (seed_batches.h) as files into the directory given as the only
// argument, so the fuzzer starts from accepted shapes instead of finding field numbers by
// chance. Used by tools/fuzz.sh.
#include <cstdio>
#include <fstream>
#include <string>

#include "proto/codec/fuzz/seed_batches.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (const auto& [name, bytes] : memtrace::fuzz::SeedBatches()) {
    const std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
