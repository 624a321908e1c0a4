#include "query/export/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace memtrace::exporter {

absl::Status WriteOutputFile(const std::string& path, std::ostream& stdout_stream,
                             const std::function<absl::Status(std::ostream&)>& write) {
  if (path.empty()) return absl::InvalidArgumentError("-o: an output file is required");
  if (path == "-") return write(stdout_stream);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
    }
    absl::Status written = write(out);
    out.close();
    if (written.ok() && !out) {
      written = absl::DataLossError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
    }
    if (!written.ok()) {
      std::remove(tmp.c_str());
      return written;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot write: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace memtrace::exporter
