#include "proto/connect/test_certs.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "proto/connect/secret_file.h"

namespace memtrace::connect::testing {

namespace {

absl::Status Run(const std::string& dir, const std::string& command) {
  const std::string log = dir + "/openssl.log";
  const std::string full = absl::StrCat("cd '", dir, "' && ", command, " >>'", log, "' 2>&1");
  if (std::system(full.c_str()) != 0) {
    std::string output;
    if (absl::StatusOr<std::string> text = ReadSmallFile("openssl log", log); text.ok()) {
      output = *text;
    }
    return absl::InternalError(absl::StrCat("`", command, "` failed: ", output));
  }
  return absl::OkStatus();
}

// A P-256 key and a certificate signed by `ca` for the names in `san` (empty = self-signed CA).
absl::Status MakeCert(const std::string& dir, const std::string& name, const std::string& cn,
                      const std::string& ca, const std::string& san) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (ca.empty()) {
    return Run(dir, absl::StrCat("openssl req -x509 ", key, " -keyout ", name, ".key -out ", name,
                                 ".pem -days 2 -subj /CN=", cn));
  }
  {
    std::ofstream ext(dir + "/" + name + ".ext");
    ext << "basicConstraints=CA:FALSE\n";
    if (!san.empty()) ext << "subjectAltName=" << san << "\n";
  }
  if (absl::Status s = Run(dir, absl::StrCat("openssl req ", key, " -keyout ", name, ".key -out ",
                                             name, ".csr -subj /CN=", cn));
      !s.ok()) {
    return s;
  }
  return Run(dir, absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                               ".key -CAcreateserial -out ", name, ".pem -days 2 -extfile ", name,
                               ".ext"));
}

}  // namespace

absl::StatusOr<TestCerts> GenerateTestCerts(const std::string& dir) {
  if (std::system("openssl version >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "the openssl command is missing (apt-get install openssl)");
  }
  ::mkdir(dir.c_str(), 0700);
  for (absl::Status s : {
           MakeCert(dir, "ca", "memtrace-test-ca", "", ""),
           MakeCert(dir, "server", "localhost", "ca", "DNS:localhost,IP:127.0.0.1"),
           MakeCert(dir, "client", "memtrace-test-agent", "ca", ""),
           MakeCert(dir, "rogue-ca", "rogue-ca", "", ""),
           MakeCert(dir, "rogue", "memtrace-rogue-agent", "rogue-ca", ""),
       }) {
    if (!s.ok()) return s;
  }
  TestCerts certs;
  certs.dir = dir;
  auto load = [&dir](const std::string& file, std::string* pem, std::string* path) {
    const std::string p = dir + "/" + file;
    absl::StatusOr<std::string> text = ReadPemFile(file, p);
    if (!text.ok()) return text.status();
    *pem = *text;
    if (path != nullptr) *path = p;
    return absl::OkStatus();
  };
  for (absl::Status s : {
           load("ca.pem", &certs.ca_pem, &certs.ca_path),
           load("server.pem", &certs.server_cert_pem, &certs.server_cert_path),
           load("server.key", &certs.server_key_pem, &certs.server_key_path),
           load("client.pem", &certs.client_cert_pem, &certs.client_cert_path),
           load("client.key", &certs.client_key_pem, &certs.client_key_path),
           load("rogue.pem", &certs.rogue_cert_pem, nullptr),
           load("rogue.key", &certs.rogue_key_pem, nullptr),
       }) {
    if (!s.ok()) return s;
  }
  return certs;
}

}  // namespace memtrace::connect::testing
