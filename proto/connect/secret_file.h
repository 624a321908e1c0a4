// Reads the small secrets and PEM files the collector and its clients are configured with
// (bearer token, TLS certificates and keys), with errors that name the file and the problem.
#ifndef MEMTRACE_COLLECTOR_SECURITY_SECRET_FILE_H_
#define MEMTRACE_COLLECTOR_SECURITY_SECRET_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::connect {

// The whole file at `path`. NOT_FOUND / PERMISSION_DENIED naming `what` and the path when it
// cannot be read; INVALID_ARGUMENT when it is empty or larger than 1 MiB (no secret or
// certificate chain is that big: a wrong path was given).
absl::StatusOr<std::string> ReadSmallFile(absl::string_view what, const std::string& path);

// A bearer token from a file: its contents with trailing whitespace (the newline an editor or
// `echo` leaves) removed. INVALID_ARGUMENT when nothing is left, or when the token contains
// characters an HTTP/2 header value cannot carry (control characters, spaces).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Checks a token given inline (environment variable); same rules as ReadTokenFile.
absl::Status CheckToken(absl::string_view what, absl::string_view token);

// A PEM file (certificate, chain or private key): ReadSmallFile plus a check that it contains a
// "-----BEGIN " line, so a DER file or a wrong path fails here with a clear message rather than
// later inside the TLS handshake.
absl::StatusOr<std::string> ReadPemFile(absl::string_view what, const std::string& path);

}  // namespace memtrace::connect

#endif  // MEMTRACE_COLLECTOR_SECURITY_SECRET_FILE_H_
