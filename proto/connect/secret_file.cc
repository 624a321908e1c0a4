#include "proto/connect/secret_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace memtrace::connect {

namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(absl::string_view what, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty file name"));
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat(what, ": cannot read \"", path, "\": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::UnavailableError(message);
  }
  std::string data;
  char buf[8192];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) {
    data.append(buf, n);
    if (data.size() > kMaxFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": \"", path, "\" is larger than 1 MiB; wrong file?"));
    }
  }
  if (std::ferror(f.get())) {
    return absl::UnavailableError(absl::StrCat(what, ": error reading \"", path, "\""));
  }
  if (data.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", path, "\" is empty"));
  }
  return data;
}

absl::Status CheckToken(absl::string_view what, absl::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": the token is empty"));
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    // Visible ASCII only: what an HTTP/2 header value can carry without escaping, and what
    // `openssl rand -hex` / `-base64` produce.
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the token has a space, control or non-ASCII character at byte ", i,
                       " (use e.g. `openssl rand -hex 32`)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> data = ReadSmallFile("token file", path);
  if (!data.ok()) return data.status();
  std::string token(absl::StripTrailingAsciiWhitespace(*data));
  if (absl::Status s = CheckToken(absl::StrCat("token file \"", path, "\""), token); !s.ok()) {
    return s;
  }
  return token;
}

absl::StatusOr<std::string> ReadPemFile(absl::string_view what, const std::string& path) {
  absl::StatusOr<std::string> data = ReadSmallFile(what, path);
  if (!data.ok()) return data.status();
  if (!absl::StrContains(*data, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": \"", path, "\" is not PEM (no \"-----BEGIN\" line)"));
  }
  return data;
}

}  // namespace memtrace::connect
