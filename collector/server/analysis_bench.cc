// Query latency of the Analysis service (not a test): builds a simulated job (default 8 ranks x
// 2000 steps x 10^6 events per rank, a leak on rank 5) straight into an EventStore (no gRPC, see
// simulated_job_store.h), then times Diverged, Growth, Leaks and Live through a real loopback
// gRPC client against an in-process CollectorServer:
//   cold  the first call after opening the store afresh (RocksDB's block cache empty; the OS page
//         cache still holds the files: dropping it needs privileges a benchmark should not have);
//   warm  the median (and max) of --repeat further calls.
//   bazel run -c opt //collector/server:analysis_bench -- --help
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collector/server/analysis_loader.h"
#include "collector/server/collector_server.h"
#include "collector/server/simulated_job_store.h"
#include "grpcpp/grpcpp.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/rollup_convert.h"

ABSL_FLAG(int, ranks, 8, "ranks of the simulated job");
ABSL_FLAG(int64_t, steps, 2000, "steps of the simulated job");
ABSL_FLAG(uint64_t, events_per_rank, 1'000'000, "approximate events per rank");
ABSL_FLAG(bool, phases, false,
          "RL-style steps with NVTX phases (rollout, weight_sync, actor_update): `live` then "
          "attributes each live allocation to the phase it was made in");
ABSL_FLAG(int, repeat, 20, "warm calls per query");
ABSL_FLAG(std::string, dir, "",
          "store directory (default: a fresh one under $TMPDIR, removed at the end); an existing "
          "store with the job is reused without generating it again");
ABSL_FLAG(bool, keep, false, "keep the default store directory");
ABSL_FLAG(int, query_threads, 0,
          "the collector's threads per live / leaks query (0 = its default, the cores up to 8)");
ABSL_FLAG(std::string, only, "",
          "run only the gRPC queries whose name contains this text, and skip the in-process "
          "breakdown (for profiling one query)");

namespace memtrace::collector {
namespace {

constexpr char kJob[] = "bench-job";

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

struct Query {
  std::string name;
  // Returns the gRPC status of one call; `bytes` receives the response size.
  std::function<grpc::Status(v1::Analysis::Stub&, size_t* bytes)> call;
};

template <typename Request, typename Report>
std::function<grpc::Status(v1::Analysis::Stub&, size_t*)> Rpc(
    Request request,
    grpc::Status (v1::Analysis::Stub::*method)(grpc::ClientContext*, const Request&, Report*)) {
  return [request, method](v1::Analysis::Stub& stub, size_t* bytes) {
    grpc::ClientContext context;
    Report report;
    grpc::Status s = (stub.*method)(&context, request, &report);
    *bytes = report.ByteSizeLong();
    return s;
  };
}

// The per-rank queries ask about the leaking rank (5 unless the job has fewer ranks).
std::vector<Query> Queries(int64_t steps, int leak_rank) {
  const std::string rank = absl::StrCat(" --rank ", leak_rank);
  std::vector<Query> q;
  v1::DivergedRequest diverged;
  diverged.set_job_id(kJob);
  q.push_back({"diverged", Rpc(diverged, &v1::Analysis::Stub::Diverged)});
  v1::GrowthRequest growth;
  growth.set_job_id(kJob);
  q.push_back({"growth --by tag", Rpc(growth, &v1::Analysis::Stub::Growth)});
  growth.mutable_params()->set_by(v1::GROWTH_BY_TAG_RANK);
  q.push_back({"growth --by tag,rank", Rpc(growth, &v1::Analysis::Stub::Growth)});
  v1::LeaksRequest leaks;
  leaks.set_job_id(kJob);
  q.push_back({"leaks (all ranks)", Rpc(leaks, &v1::Analysis::Stub::Leaks)});
  leaks.set_rank(leak_rank);
  q.push_back({absl::StrCat("leaks", rank), Rpc(leaks, &v1::Analysis::Stub::Leaks)});
  v1::LiveRequest live;
  live.set_job_id(kJob);
  live.set_rank(leak_rank);
  live.set_at_step(steps / 2);
  q.push_back(
      {absl::StrCat("live", rank, " --at-step ", steps / 2), Rpc(live, &v1::Analysis::Stub::Live)});
  live.clear_at_step();
  q.push_back({absl::StrCat("live", rank, " (latest)"), Rpc(live, &v1::Analysis::Stub::Live)});
  v1::HeadroomRequest headroom;
  headroom.set_job_id(kJob);
  q.push_back({"headroom", Rpc(headroom, &v1::Analysis::Stub::Headroom)});
  return q;
}

absl::StatusOr<std::unique_ptr<CollectorServer>> Start(const std::string& dir) {
  CollectorServerOptions options;
  options.listen = "127.0.0.1:0";
  options.store.dir = dir;
  options.store.durability = Durability::kAsync;
  options.query_threads = absl::GetFlag(FLAGS_query_threads);
  return CollectorServer::Start(options);
}

// The store directory: --dir, or a fresh one under $TMPDIR that is removed when this goes out
// of scope unless --keep is given.
class StoreDir {
 public:
  static absl::StatusOr<StoreDir> Create() {
    StoreDir d;
    d.path_ = absl::GetFlag(FLAGS_dir);
    if (!d.path_.empty()) return d;
    const char* tmp = getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/analysis_bench.XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a directory from ", pattern));
    }
    d.path_ = pattern + "/db";
    d.temporary_ = !absl::GetFlag(FLAGS_keep);
    return d;
  }
  StoreDir(StoreDir&& other) noexcept
      : path_(std::move(other.path_)), temporary_(std::exchange(other.temporary_, false)) {}
  StoreDir& operator=(StoreDir&&) = delete;
  ~StoreDir() {
    if (!temporary_) return;
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(path_).parent_path(), ignored);
  }
  const std::string& path() const { return path_; }
  bool temporary() const { return temporary_; }

 private:
  StoreDir() = default;
  std::string path_;
  bool temporary_ = false;
};

sim::WorkloadOptions WorkloadFromFlags() {
  sim::WorkloadOptions w;
  w.ranks = absl::GetFlag(FLAGS_ranks);
  w.steps = absl::GetFlag(FLAGS_steps);
  w.events_per_rank = absl::GetFlag(FLAGS_events_per_rank);
  w.phases = absl::GetFlag(FLAGS_phases);
  w.leak_rank = w.ranks > 5 ? 5 : w.ranks - 1;
  w.leak_from_step = 30;
  // Small enough that the leaking rank does not run out of its 80 GiB within 2000 steps.
  w.leak_bytes_per_step = 12 * sim::kMiB;
  return w;
}

// Stores the simulated job unless the store already holds it, and prints what its rollups hold.
absl::Status PrepareJob(const std::string& dir, const sim::WorkloadOptions& w) {
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = Start(dir);
  if (!server.ok()) return server.status();
  if (!(*server)->store().ListRanks(kJob).ok()) {
    const absl::Time start = absl::Now();
    absl::StatusOr<StoredJobStats> stats = StoreSimulatedJob((*server)->store(), kJob, w, 16384);
    if (!stats.ok()) return stats.status();
    const absl::Duration took = absl::Now() - start;
    printf(
        "generated %s: %d ranks x %ld steps, %lu events (%lu per rank) in %lu batches, "
        "%.1f s (%.2f M events/s, simulation + EventStore::Append, async WAL)\n",
        kJob, w.ranks, static_cast<long>(w.steps), static_cast<unsigned long>(stats->events),
        static_cast<unsigned long>(stats->events / w.ranks),
        static_cast<unsigned long>(stats->batches), absl::ToDoubleSeconds(took),
        static_cast<double>(stats->events) / absl::ToDoubleSeconds(took) / 1e6);
  } else {
    printf("reusing %s in %s\n", kJob, dir.c_str());
  }
  absl::StatusOr<analysis::JobTimeline> job =
      LoadJobTimeline((*server)->store(), kJob, v1::TIMELINE_AXIS_STEP);
  if (!job.ok()) return absl::OkStatus();  // the queries below say what is wrong
  size_t rows = 0, tags = 0;
  for (const analysis::RankTimeline& r : job->ranks) {
    rows += r.steps.size();
    for (const analysis::StepPoint& p : r.steps) tags += p.by_tag().size();
  }
  printf("rollups: %zu rows, %.1f tags per row, %zu names\n", rows,
         rows > 0 ? static_cast<double>(tags) / rows : 0.0, job->names.size());
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Where a rollup-only query's time goes, in-process (no gRPC): reading and converting the
// rollups (all of each row, the scalars from the series, or only diverged's columns from the
// series), and the analyses themselves.
absl::Status InProcessBreakdown(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = Start(dir);
  if (!server.ok()) return server.status();
  const EventStore& store = (*server)->store();
  std::vector<double> full, scalars, metrics, diverged, growth;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_repeat)); ++i) {
    absl::Time t = absl::Now();
    absl::StatusOr<analysis::JobStepMetrics> columns =
        LoadJobStepMetrics(store, kJob, v1::TIMELINE_AXIS_STEP);
    metrics.push_back(Ms(absl::Now() - t));
    if (!columns.ok()) return columns.status();
    t = absl::Now();
    analysis::DivergenceReport d = analysis::FindDivergence(*columns);
    diverged.push_back(Ms(absl::Now() - t));
    t = absl::Now();
    absl::StatusOr<analysis::JobTimeline> job =
        LoadJobTimeline(store, kJob, v1::TIMELINE_AXIS_STEP, RollupDetail::kScalars);
    scalars.push_back(Ms(absl::Now() - t));
    if (!job.ok()) return job.status();
    t = absl::Now();
    job = LoadJobTimeline(store, kJob, v1::TIMELINE_AXIS_STEP, RollupDetail::kFull);
    full.push_back(Ms(absl::Now() - t));
    if (!job.ok()) return job.status();
    t = absl::Now();
    analysis::GrowthReport g = analysis::FindGrowth(*job);
    growth.push_back(Ms(absl::Now() - t));
  }
  printf(
      "\nin-process, first / median: load diverged's columns (series) %.1f / %.1f ms, "
      "FindDivergence %.1f / %.1f ms, load scalars (series) %.1f / %.1f ms, load full rows "
      "%.1f / %.1f ms, FindGrowth(by tag) %.1f / %.1f ms\n",
      metrics[0], Median(metrics), diverged[0], Median(diverged), scalars[0], Median(scalars),
      full[0], Median(full), growth[0], Median(growth));
  return absl::OkStatus();
}

// One query through a loopback client: cold on a store opened afresh, then --repeat warm calls.
absl::Status TimeQuery(const std::string& dir, const Query& q) {
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = Start(dir);
  if (!server.ok()) return server.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(1 << 30);
  std::unique_ptr<v1::Analysis::Stub> stub = v1::Analysis::NewStub(
      grpc::CreateCustomChannel((*server)->address(), grpc::InsecureChannelCredentials(), args));
  // Connect first, so that cold measures the query, not the TCP handshake.
  {
    grpc::ClientContext context;
    v1::DivergedRequest empty;
    v1::DivergenceReport ignored;
    (void)stub->Diverged(&context, empty, &ignored);  // INVALID_ARGUMENT, no store read
  }
  size_t bytes = 0;
  absl::Time t = absl::Now();
  grpc::Status s = q.call(*stub, &bytes);
  const absl::Duration cold = absl::Now() - t;
  if (!s.ok()) return absl::InternalError(absl::StrCat(q.name, ": ", s.error_message()));
  std::vector<double> warm;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeat); ++i) {
    t = absl::Now();
    s = q.call(*stub, &bytes);
    warm.push_back(Ms(absl::Now() - t));
  }
  std::sort(warm.begin(), warm.end());
  printf("%-32s %10.1f %10.1f %10.1f %9.1fK\n", q.name.c_str(), Ms(cold),
         warm.empty() ? 0.0 : warm[warm.size() / 2], warm.empty() ? 0.0 : warm.back(),
         static_cast<double>(bytes) / 1024);
  return absl::OkStatus();
}

absl::Status Run() {
  absl::StatusOr<StoreDir> dir = StoreDir::Create();
  if (!dir.ok()) return dir.status();
  const sim::WorkloadOptions w = WorkloadFromFlags();
  if (absl::Status s = PrepareJob(dir->path(), w); !s.ok()) return s;
  const std::string only = absl::GetFlag(FLAGS_only);
  if (only.empty()) {
    if (absl::Status s = InProcessBreakdown(dir->path()); !s.ok()) return s;
  }
  printf("\n%-32s %10s %10s %10s %10s\n", "query (gRPC loopback)", "cold ms", "warm ms", "warm max",
         "response");
  for (const Query& q : Queries(w.steps, *w.leak_rank)) {
    if (!absl::StrContains(q.name, only)) continue;
    if (absl::Status s = TimeQuery(dir->path(), q); !s.ok()) return s;
  }
  if (!dir->temporary()) printf("\nstore kept in %s\n", dir->path().c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace memtrace::collector

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Query latency of the Analysis service on a simulated job, cold and warm (a benchmark, "
      "not a test).\nUsage: analysis_bench [--ranks N --steps N ...]");
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = memtrace::collector::Run();
  if (s.ok()) return 0;
  fprintf(stderr, "analysis_bench: %s\n", std::string(s.message()).c_str());
  return 1;
}
