#include "tests/reliability/harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/query.grpc.pb.h"

namespace memtrace::reliability {

namespace {

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

grpc::ChannelArguments BigMessages() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return args;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

std::string ReadFileOr(const std::string& path, const std::string& fallback) {
  std::ifstream in(path);
  if (!in) return fallback;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<std::unique_ptr<Child>> Child::Spawn(const std::vector<std::string>& argv,
                                                    const Env& env, const std::string& name) {
  std::unique_ptr<Child> child(new Child());
  const std::string base = test_util::TmpPath(name);
  child->out_ = base + ".out";
  child->err_ = base + ".err";
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int out = open(child->out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(child->err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  child->pid_ = pid;
  return child;
}

Child::~Child() {
  if (Running()) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(5));
  }
}

bool Child::Running() {
  if (pid_ <= 0 || status_ != -1) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

void Child::Signal(int sig) {
  if (Running()) kill(pid_, sig);
}

int Child::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      status_ = 128 + SIGKILL;
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return status_;
}

CollectorProcess::CollectorProcess(std::string data_dir, std::vector<std::string> flags, Env env)
    : data_dir_(std::move(data_dir)), flags_(std::move(flags)), env_(std::move(env)) {}

std::vector<std::string> CollectorProcess::args() const {
  std::vector<std::string> argv = {kCollectorBin, "--data", data_dir_};
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  return argv;
}

absl::Status CollectorProcess::Start(int port) {
  if (port < 0) port = port_;
  const std::string port_file = absl::StrCat(data_dir_, ".port");
  std::remove(port_file.c_str());
  std::vector<std::string> argv = args();
  argv.push_back("--listen");
  argv.push_back(absl::StrCat("127.0.0.1:", port));
  argv.push_back("--port_file");
  argv.push_back(port_file);
  absl::StatusOr<std::unique_ptr<Child>> child =
      Child::Spawn(argv, env_, absl::StrCat("collector", ++starts_));
  if (!child.ok()) return child.status();
  child_ = *std::move(child);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    if (!child_->Running()) {
      return absl::UnavailableError(absl::StrCat("collector exited: ", child_->Stderr()));
    }
    int p = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOr(port_file)), &p) && p > 0) {
      port_ = p;
      if (Healthy(address(), client_security_)) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("collector not serving after 20 s: ", child_->Stderr()));
}

void CollectorProcess::Kill9() {
  if (child_ == nullptr) return;
  child_->Signal(SIGKILL);
  child_->Wait(absl::Seconds(10));
}

int CollectorProcess::Stop() {
  if (child_ == nullptr) return -1;
  child_->Signal(SIGTERM);
  return child_->Wait(absl::Seconds(10));
}

std::string CollectorProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

bool Healthy(const std::string& address, const connect::ClientSecurity& security) {
  grpc::GenericStub stub(connect::CreateCollectorChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(Deadline(absl::Seconds(2)));
  grpc::CompletionQueue cq;
  grpc::Slice empty("", 0);
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !status.ok()) return false;
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!response.Dump(&slices).ok()) return false;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes == std::string("\x08\x01", 2);  // status: SERVING
}

absl::StatusOr<v1::ListJobsResponse> ListJobs(const std::string& address,
                                              const connect::ClientSecurity& security) {
  auto stub = v1::Query::NewStub(connect::CreateCollectorChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(Deadline(absl::Seconds(20)));
  v1::ListJobsResponse response;
  grpc::Status s = stub->ListJobs(&context, v1::ListJobsRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  return response;
}

absl::StatusOr<v1::ListRanksResponse> ListRanks(const std::string& address, const std::string& job,
                                                const connect::ClientSecurity& security) {
  auto stub = v1::Query::NewStub(connect::CreateCollectorChannel(address, security, BigMessages()));
  grpc::ClientContext context;
  context.set_deadline(Deadline(absl::Seconds(30)));
  v1::ListRanksRequest request;
  request.set_job_id(job);
  v1::ListRanksResponse response;
  grpc::Status s = stub->ListRanks(&context, request, &response);
  if (!s.ok()) return FromGrpc(s);
  return response;
}

absl::StatusOr<std::vector<Event>> ReadAllEvents(const std::string& address, const std::string& job,
                                                 uint32_t rank, uint32_t attempt,
                                                 const connect::ClientSecurity& security) {
  auto stub = v1::Query::NewStub(connect::CreateCollectorChannel(address, security, BigMessages()));
  std::vector<Event> events;
  uint64_t from = 1;
  while (from != 0) {
    grpc::ClientContext context;
    context.set_deadline(Deadline(absl::Seconds(30)));
    v1::ReadEventsRequest request;
    request.set_job_id(job);
    request.set_rank(rank);
    request.set_attempt(attempt);
    request.set_from_seq(from);
    request.set_limit(65536);
    v1::ReadEventsResponse response;
    grpc::Status s = stub->ReadEvents(&context, request, &response);
    if (!s.ok()) return FromGrpc(s);
    BatchLimits unlimited;
    unlimited.max_events = UINT32_MAX;
    unlimited.max_strings = UINT32_MAX;
    unlimited.max_string_bytes = UINT32_MAX;
    absl::StatusOr<DecodedBatch> batch = DecodeBatch(response.batch(), unlimited);
    if (!batch.ok()) return batch.status();
    events.insert(events.end(), batch->events.begin(), batch->events.end());
    if (response.next_seq() != 0 && response.next_seq() <= from) {
      return absl::InternalError(absl::StrCat("ReadEvents did not advance past ", from));
    }
    from = response.next_seq();
  }
  return events;
}

grpc::Status RawIngest(const std::string& address, const std::vector<std::string>& messages,
                       std::vector<std::string>* acks, const connect::ClientSecurity& security) {
  std::shared_ptr<grpc::Channel> channel =
      connect::CreateCollectorChannel(address, security, BigMessages());
  grpc::ClientContext context;
  context.set_deadline(Deadline(absl::Seconds(10)));
  const grpc::internal::RpcMethod method("/memtrace.v1.Ingest/Stream",
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  for (const std::string& m : messages) {
    grpc::Slice slice(m);
    grpc::ByteBuffer buffer(&slice, 1);
    if (!stream->Write(buffer)) break;
  }
  stream->WritesDone();
  grpc::ByteBuffer ack;
  while (stream->Read(&ack)) {
    if (acks == nullptr) continue;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (ack.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    acks->push_back(bytes);
  }
  return stream->Finish();
}

std::map<std::string, std::string> LastLine(const std::string& text, const std::string& prefix) {
  std::map<std::string, std::string> kv;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, prefix + " ")) continue;
    kv.clear();
    for (absl::string_view word : absl::StrSplit(line.substr(prefix.size() + 1), ' ')) {
      const size_t eq = word.find('=');
      if (eq != absl::string_view::npos) {
        kv[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
      }
    }
  }
  return kv;
}

uint64_t U64(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  uint64_t v = 0;
  if (it == kv.end() || !absl::SimpleAtoi(it->second, &v)) return UINT64_MAX;
  return v;
}

Env AgentEnv(const std::string& address, const std::string& job, int rank, int world_size) {
  return {{"MEMTRACE_COLLECTOR", address},
          {"MEMTRACE_JOB_ID", job},
          {"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world_size)},
          {"LOCAL_WORLD_SIZE", std::to_string(world_size)}};
}

}  // namespace memtrace::reliability
