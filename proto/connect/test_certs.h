// Test-only: a throwaway certificate authority with a server certificate (for "localhost" and
// 127.0.0.1) and a client certificate, generated with the openssl command line when a test
// runs, so that no private key is ever committed.
#ifndef MEMTRACE_COLLECTOR_SECURITY_TEST_CERTS_H_
#define MEMTRACE_COLLECTOR_SECURITY_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace memtrace::connect::testing {

struct TestCerts {
  std::string dir;  // where the files below are
  std::string ca_pem, ca_path;
  std::string server_cert_pem, server_cert_path;
  std::string server_key_pem, server_key_path;
  std::string client_cert_pem, client_cert_path;
  std::string client_key_pem, client_key_path;
  // Signed by another CA: a client with it must be refused under mutual TLS.
  std::string rogue_cert_pem, rogue_key_pem;
};

// Generates everything into `dir` (created when missing). FAILED_PRECONDITION when openssl is
// not installed (Debian package "openssl"), INTERNAL with its output when a command fails.
absl::StatusOr<TestCerts> GenerateTestCerts(const std::string& dir);

}  // namespace memtrace::connect::testing

#endif  // MEMTRACE_COLLECTOR_SECURITY_TEST_CERTS_H_
