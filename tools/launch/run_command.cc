#include "tools/launch/run_command.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/identity/env.h"
#include "agent/identity/identity.h"
#include "proto/connect/collector_address.h"
#include "query/analysis/units.h"
#include "query/cli/flags.h"
#include "query/cli/query_client.h"
#include "query/cli/text_escape.h"
#include "tools/launch/child_process.h"
#include "tools/launch/health_check.h"
#include "tools/launch/launch_paths.h"
#include "tools/launch/local_collector.h"
#include "tools/launch/run_args.h"
#include "tools/launch/supervisor.h"
#include "tools/launch/work_dir.h"
#include "tools/launch/worker_env.h"

namespace memtrace::launch {
namespace {

using cli::CommandIo;

constexpr char kName[] = "run";

constexpr char kUsage[] =
    "memtrace run [flags] [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with the memtrace agent injected into every CUDA process it starts (through\n"
    "CUDA_INJECTION64_PATH, which launchers such as torchrun, mpirun and srun pass on to their\n"
    "workers), recording to a collector. Returns COMMAND's exit code unchanged (128 + N when\n"
    "it was killed by signal N; 127 when it does not exist).\n"
    "\n"
    "  memtrace run -- torchrun --nproc_per_node 8 train.py\n"
    "  memtrace run --collector head:7431 -- torchrun --nnodes 2 --rdzv_id exp1 ... train.py\n"
    "\n"
    "Without --collector (and without $MEMTRACE_COLLECTOR) a local collector is started on\n"
    "127.0.0.1 (--listen) for the duration of the job, storing into --data (default\n"
    "~/.memtrace/data).\n"
    "With --collector the address is checked first; an unreachable collector is reported and\n"
    "the job runs anyway (the agents keep retrying): the tracer never stops a job.\n"
    "\n"
    "Job id: --job, else $MEMTRACE_JOB_ID, else $TORCHELASTIC_RUN_ID, else the launcher's own id\n"
    "as each worker sees it (torchrun's rendezvous id, Ray, Slurm, Open MPI), else\n"
    "$MEMTRACE_DEFAULT_JOB_ID, else a generated job-<date>-<time>-<random>. On several\n"
    "nodes, run the same command on each with the same --collector (and --job, unless the\n"
    "launcher's id is shared, like torchrun's --rdzv_id).\n"
    "\n"
    "Signals sent to memtrace (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2) are passed on to\n"
    "COMMAND. In a terminal (foreground or background) COMMAND shares memtrace's process group\n"
    "and gets Ctrl-C and job control directly; without one (a scheduler, setsid) it runs in a\n"
    "group of its own, and a signal sent to memtrace's group reaches its group once, passed on.";

struct RunOptions {
  std::string collector;
  std::string job;
  std::string data_dir;
  std::string listen = "127.0.0.1:0";
  std::string agent_lib;
  std::string nvtx_lib;
  bool no_agent = false;
  bool dry_run = false;
  absl::Duration timeout = absl::Seconds(3);
  absl::Duration health_interval = absl::Seconds(5);
};

// A FlagSet that remembers which flags take a value (for SplitRunArguments).
struct RunFlags {
  cli::FlagSet flags;
  std::set<std::string> with_values;

  void String(const std::string& name, const std::string& value_name, const std::string& help,
              std::string* target) {
    flags.AddString(name, value_name, help, target);
    with_values.insert(name);
  }
  void Duration(const std::string& name, const std::string& help, absl::Duration* target) {
    flags.AddDuration(name, "DURATION", help, target);
    with_values.insert(name);
  }
};

void Register(RunFlags& f, RunOptions* o) {
  f.String("collector", "ADDR",
           "collector host:port (default $MEMTRACE_COLLECTOR; neither: start a local one)",
           &o->collector);
  f.String("job", "NAME", "job id for every process of the run (see above)", &o->job);
  f.String("data", "DIR", "the local collector's RocksDB directory (default ~/.memtrace/data)",
           &o->data_dir);
  f.String("listen", "HOST:PORT",
           "where the local collector listens (default 127.0.0.1:0; 0.0.0.0:PORT serves the "
           "workers of a multi-node srun/mpirun started here, in plaintext)",
           &o->listen);
  f.String("agent_lib", "PATH",
           "the agent library (default $MEMTRACE_AGENT_LIB, else found next to memtrace)",
           &o->agent_lib);
  f.String("nvtx_lib", "PATH",
           "NVTX_INJECTION64_PATH (default $MEMTRACE_NVTX_LIB, else the agent library)",
           &o->nvtx_lib);
  f.flags.AddBool("no_agent",
                  "run without the agent: nothing is recorded (the collector and env are set up)",
                  &o->no_agent);
  f.flags.AddBool("dry_run", "print the environment and command, quoted for a shell; start nothing",
                  &o->dry_run);
  f.Duration("timeout", "how long the collector check before the job may take (default 3s)",
             &o->timeout);
  f.Duration("health_interval",
             "how often the collector is checked while the job runs (default 5s)",
             &o->health_interval);
}

std::string TempBase() {
  const char* base = getenv("TMPDIR");
  return base != nullptr && *base != '\0' ? base : "/tmp";
}

// A store of the run's own when the usual one is held by another collector: named apart from
// the work directories (work_dir.h), which later runs remove once their run is gone.
std::string FallbackDataDir() {
  std::string pattern = absl::StrCat(TempBase(), "/memtrace-data-XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) return "";
  return buffer.data();
}

// An empty fallback store's directory (the collector did not start in it).
void RemoveIfEmpty(const std::string& dir) {
  if (!dir.empty()) rmdir(dir.c_str());
}

std::string DefaultDataDir(const EnvLookup& env) {
  if (std::optional<std::string> home = EnvNonEmpty(env, "HOME")) {
    return absl::StrCat(*home, "/.memtrace/data");
  }
  return "";
}

// (ranks, events) per job, to tell afterwards what this run recorded.
using JobCounts = std::map<std::string, std::pair<uint32_t, uint64_t>>;

// A query needs the token the agents use too (the health check answers without one), so this
// is also where a token the collector refuses shows.
absl::StatusOr<JobCounts> CountJobs(const std::string& address) {
  absl::StatusOr<cli::QueryClient> client = cli::QueryClient::Create(address, absl::Seconds(3));
  if (!client.ok()) return client.status();
  absl::StatusOr<v1::ListJobsResponse> jobs = client->ListJobs();
  if (!jobs.ok()) return jobs.status();
  JobCounts out;
  for (const v1::JobSummary& job : jobs->jobs()) {
    out[job.job_id()] = {job.ranks(), job.events()};
  }
  return out;
}

// Health of a remote collector while the job runs.
struct CollectorWatch {
  std::string address;
  bool reachable_at_start = true;
  bool down = false;
  int outages = 0;
  absl::Time down_since;
  absl::Duration down_total;
  std::string last_error;
};

class Runner {
 public:
  Runner(RunOptions options, std::vector<std::string> command, CommandIo& io)
      : o_(std::move(options)), command_(std::move(command)), io_(io), env_(ProcessEnvironment()) {}

  int Run();

 private:
  void Say(const std::string& line) { io_.err << "memtrace: " << line << "\n" << std::flush; }
  void Warn(const std::string& line) {
    io_.err << "memtrace: WARNING: " << line << "\n" << std::flush;
  }
  int Fail(const absl::Status& status) {
    io_.err << "memtrace run: " << status.message() << "\n" << std::flush;
    return cli::kExitError;
  }
  // The agent and NVTX libraries (none with --no_agent) and the job id for the workers.
  absl::StatusOr<AgentEnvironment> PrepareAgent();
  // MEMTRACE_ATTEMPT / MEMTRACE_DEVICE in this environment, which the workers inherit: an error
  // when the agent would refuse them.
  absl::Status CheckInheritedSettings() const;
  // o_.collector: --collector, else $MEMTRACE_COLLECTOR, else empty (a local one); an address
  // that is not HOST:PORT is an error naming where it came from.
  absl::Status ChooseCollectorAddress();
  // --dry_run: the workers' environment and the command, as shell lines.
  int PrintDryRun(AgentEnvironment agent);
  // The job is not started after all: the local collector stopped, the work dir removed.
  void AbandonStart();
  absl::StatusOr<pid_t> StartJob(const AgentEnvironment& agent, const sigset_t& child_mask,
                                 JobGroup job_group);
  // Waits for the job, passing signals on and ticking (Tick); its wait status.
  int SuperviseToTheEnd(pid_t job, JobGroup job_group, const ScopedSignalBlock& signals);
  // Starts the local collector when no address was given, else looks at the given one (an
  // unreachable collector is a warning: the job runs anyway). Sets o_.collector.
  absl::Status ConnectCollector(const sigset_t& child_mask);
  absl::Status StartLocalCollector(const sigset_t& child_mask);
  // `workers_job`: the id the workers will use when this run knows it (torchrun's --rdzv_id).
  void AnnounceJob(const JobIdChoice& job, const std::string& workers_job);
  // The jobs the collector holds before the run, to tell afterwards what the run added; nullopt
  // (with a warning saying why) when it does not answer.
  std::optional<JobCounts> CountJobsBefore();
  // A job the collector already holds from a run that ended, under the attempt this run's
  // workers will use: said before the job starts, with the attempt they get (see the definition).
  void NoteRerunOfEndedJob(const JobCounts& before, const std::string& job);
  // After the job: the collector's health, what was recorded, the local collector stopped.
  void FinishRun(const std::optional<JobCounts>& before, const std::string& own_job);
  void StopLocalCollector();
  void Tick();
  void ReportCollectorAtEnd();
  // What the run added to `job` (or, without an id of its own, to the jobs its workers wrote
  // to) since `before`.
  void ReportRecorded(const JobCounts& before, const std::string& job);
  // What this run's workers stored in `job` (their streams carry run_id_); nullopt when no
  // stream of the job names a run (older agents) or the collector does not answer.
  struct RunShare {
    uint64_t events = 0;
    uint32_t ranks = 0;    // distinct rank numbers
    uint32_t streams = 0;  // rank-attempts: more than ranks after a launcher's restart
    uint32_t subprocesses = 0;  // processes stored as a rank's subprocess (not in the two above)
    uint32_t parents = 0;       // processes that started a rank's and connected after it (in none
                                // of the three above)
  };
  std::optional<RunShare> ShareOfThisRun(const cli::QueryClient& client, const std::string& job);

  RunOptions o_;
  std::vector<std::string> command_;
  CommandIo& io_;
  EnvLookup env_;
  WorkDir work_dir_;
  std::unique_ptr<LocalCollector> local_;
  std::string data_dir_;
  std::optional<int> local_died_status_;
  absl::Time local_died_at_;
  CollectorWatch watch_;
  absl::Time job_started_;
  // MEMTRACE_RUN_ID of this run's workers (RankIdentity.run_id).
  std::string run_id_;
};

absl::Status Runner::StartLocalCollector(const sigset_t& child_mask) {
  absl::StatusOr<std::string> binary = FindCollectorBinary(env_, CurrentExecutablePath());
  if (!binary.ok()) {
    return absl::NotFoundError(absl::StrCat(
        binary.status().message(),
        "; set MEMTRACE_COLLECTOR_BIN, or pass --collector ADDR to use a running collector"));
  }
  // Those of runs killed before they could remove theirs (SIGKILL): their lock is nobody's.
  SweepStaleWorkDirs(TempBase());
  absl::StatusOr<WorkDir> work_dir = WorkDir::Create(TempBase());
  if (!work_dir.ok()) return work_dir.status();
  work_dir_ = *std::move(work_dir);
  LocalCollectorOptions options;
  options.binary = *binary;
  options.work_dir = work_dir_.path();
  options.listen = o_.listen;
  options.signal_mask = child_mask;
  const bool explicit_dir = !o_.data_dir.empty();
  options.data_dir = explicit_dir ? o_.data_dir : DefaultDataDir(env_);
  if (options.data_dir.empty()) options.data_dir = absl::StrCat(work_dir_.path(), "/data");
  absl::StatusOr<std::unique_ptr<LocalCollector>> started = LocalCollector::Start(options);
  // Typically another run's collector holds the directory's lock: record into a fresh directory
  // rather than not at all (a --data DIR too). Only for the collector's errors about its store
  // ("cannot open store in DIR", "data directory DIR ..."): any other (the --listen port taken)
  // would only fail again there, and was reported as a problem with the directory.
  const auto about_the_store = [](const absl::Status& s) {
    return absl::StrContains(s.message(), "cannot open store") ||
           absl::StrContains(s.message(), "data directory");
  };
  if (!started.ok() && about_the_store(started.status())) {
    const std::string fallback = FallbackDataDir();
    Warn(absl::StrCat("the local collector could not use ", options.data_dir,
                      explicit_dir ? " (--data)" : "", " (", started.status().message(),
                      "); using ", fallback, " instead"));
    options.data_dir = fallback;
    started = LocalCollector::Start(options);
    if (!started.ok()) RemoveIfEmpty(fallback);
  }
  if (!started.ok()) {
    work_dir_.Remove();
    return started.status();
  }
  local_ = *std::move(started);
  data_dir_ = options.data_dir;
  o_.collector = local_->address();
  Say(absl::StrCat("local collector at ", local_->address(), ", data ", data_dir_, ", pid ",
                   local_->pid()));
  if (local_->plaintext_on_network()) {
    Warn(absl::StrCat("the local collector listens on ", o_.listen,
                      " in plaintext: anyone on the network can read the traces",
                      EnvNonEmpty(env_, "MEMTRACE_TOKEN").has_value() ||
                              EnvNonEmpty(env_, "MEMTRACE_TOKEN_FILE").has_value()
                          ? ""
                          : ", and send to it (set MEMTRACE_TOKEN to require a token)"));
  }
  return absl::OkStatus();
}

void Runner::Tick() {
  if (local_ != nullptr) {
    if (!local_died_status_.has_value()) {
      if (std::optional<int> status = local_->Poll()) {
        local_died_status_ = status;
        local_died_at_ = absl::Now();
        Warn(absl::StrCat("the local collector (pid ", local_->pid(), ") ",
                          DescribeWaitStatus(*status),
                          " during the job; the job keeps running, but what its agents send "
                          "from now on is not stored"));
      }
    }
    return;
  }
  absl::Status health = CheckCollector(watch_.address, absl::Seconds(1));
  const absl::Time now = absl::Now();
  if (!health.ok() && !watch_.down) {
    watch_.down = true;
    watch_.down_since = now;
    ++watch_.outages;
    watch_.last_error = std::string(health.message());
    Warn(absl::StrCat(health.message(), " (the job keeps running; agents retry)"));
  } else if (health.ok() && watch_.down) {
    watch_.down = false;
    watch_.down_total += now - watch_.down_since;
    Say(absl::StrCat("collector at ", watch_.address, " is reachable again"));
  }
}

void Runner::ReportCollectorAtEnd() {
  if (local_ != nullptr) {
    if (!local_died_status_.has_value()) local_died_status_ = local_->Poll();
    if (local_died_status_.has_value()) {
      Warn(absl::StrCat("the local collector ", DescribeWaitStatus(*local_died_status_),
                        " before the job ended; events recorded after that were lost. Its log (",
                        local_->log_path(), ", kept) ends: ", local_->LogTail(400)));
    }
    return;
  }
  if (watch_.down) watch_.down_total += absl::Now() - watch_.down_since;
  if (watch_.outages > 0 || !watch_.reachable_at_start) {
    std::string when;
    if (!watch_.reachable_at_start) when = "when the job started";
    if (watch_.outages > 0) {
      absl::StrAppend(&when, when.empty() ? "" : " and ", watch_.outages, " time(s) while it ran");
    }
    // Unreachable, or reached but taking no events (its store's full disk: NOT_SERVING,
    // health_check.cc), as the last check found it.
    const bool took_none = absl::StrContains(watch_.last_error, "takes no events");
    const char* what = took_none ? "took no events" : "was unreachable";
    const char* still =
        took_none ? ", still taking none at the end" : ", still unreachable at the end";
    Warn(absl::StrCat("the collector at ", watch_.address, " ", what, " ", when, " (",
                      absl::FormatDuration(absl::Trunc(watch_.down_total, absl::Seconds(1))),
                      " in all", watch_.down ? still : "", "; last error: ", watch_.last_error,
                      "); events the agents could not deliver are missing"));
  }
}

void Runner::ReportRecorded(const JobCounts& before, const std::string& own_job) {
  absl::StatusOr<JobCounts> after = CountJobs(o_.collector);
  if (!after.ok()) {
    Warn(absl::StrCat("cannot tell what was recorded: ", after.status().message()));
    return;
  }
  // The jobs that grew during the run. With its own job id the run reports that job only:
  // others may share the collector. Without one (the workers' launcher named it), the jobs
  // with a rank this run's workers produced (RankIdentity.run_id), when agents say so.
  std::vector<std::string> grew;
  for (const auto& [job, counts] : *after) {
    if (!own_job.empty() && job != own_job) continue;
    uint64_t previous = 0;
    if (auto it = before.find(job); it != before.end()) previous = it->second.second;
    if (counts.second != previous) grew.push_back(job);
  }
  // The streams this run's workers produced, when agents say which (another run of the same
  // job at once, a late node of the last one, or another team's job grows too).
  std::map<std::string, std::optional<RunShare>> shares;
  bool any_named = false;
  if (!run_id_.empty() && !grew.empty()) {
    // One client for all the jobs: each made a channel of its own.
    if (absl::StatusOr<cli::QueryClient> client =
            cli::QueryClient::Create(o_.collector, o_.timeout);
        client.ok()) {
      for (const std::string& job : grew) {
        any_named |= (shares[job] = ShareOfThisRun(*client, job)).has_value();
      }
    }
  }
  if (own_job.empty() && any_named) {
    grew.erase(std::remove_if(grew.begin(), grew.end(),
                              [&](const std::string& job) {
                                return !shares[job].has_value() || shares[job]->ranks == 0;
                              }),
               grew.end());
  }
  int reported = 0;
  for (const std::string& job : grew) {
    const auto& counts = after->at(job);
    ++reported;
    if (const std::optional<RunShare>& share = shares[job]; share.has_value()) {
      // A torchrun restart makes each rank's next attempt: "4 rank(s)" for 2 ranks run twice.
      Say(absl::StrCat("job ", job, ": ", share->events, " events recorded by this run's ",
                       share->ranks, " rank(s)",
                       share->streams > share->ranks
                           ? absl::StrCat(", ", share->streams, " rank-attempts after restarts")
                           : "",
                       analysis::FormatBesideTheRanks(share->subprocesses, share->parents), " (",
                       counts.first, " rank(s) in the job)"));
      continue;
    }
    uint64_t previous = 0;
    if (auto it = before.find(job); it != before.end()) previous = it->second.second;
    Say(absl::StrCat("job ", job, ": ", counts.second - previous,
                     " events recorded during this run (", counts.first, " rank(s) in the job)"));
  }
  if (reported == 0) {
    Say(o_.no_agent ? "no events were recorded for this run (--no_agent: it ran untraced)"
                    : "no events were recorded for this run (the agent attaches at a process's "
                      "first CUDA call; did the job use the GPU?)");
  }
}

std::optional<Runner::RunShare> Runner::ShareOfThisRun(const cli::QueryClient& client,
                                                       const std::string& job) {
  absl::StatusOr<v1::ListRanksResponse> ranks = client.ListRanks(job);
  if (!ranks.ok()) return std::nullopt;
  RunShare share;
  std::set<uint32_t> numbers;  // a rank the launcher restarted is one rank of several attempts
  bool any_named = false;
  for (const v1::RankSummary& r : ranks->ranks()) {
    any_named |= !r.identity().run_id().empty();
    if (r.identity().run_id() != run_id_) continue;
    share.events += r.events_stored();
    if (r.identity().started_the_rank()) {
      ++share.parents;
      continue;
    }
    if (r.identity().has_subprocess_of_rank()) {
      ++share.subprocesses;
      continue;
    }
    ++share.streams;
    numbers.insert(r.rank());
  }
  share.ranks = static_cast<uint32_t>(numbers.size());
  if (!any_named) return std::nullopt;  // agents from before RankIdentity.run_id
  return share;
}

// The collector keeps one stream per rank and attempt, one process's (docs/RELIABILITY.md,
// "Admission"): a rerun under the job id of a run that ended, same attempt, is stored as the
// next attempt of each rank (the agents ask for that), which the analyses read by default. Said
// before the job starts, so that "attempt 1" in the tables is no surprise. A job whose streams
// at that attempt are all ended (complete, or vanished with its process) is such a run; one with
// a stream still connected is another node of this run, starting first.
void Runner::NoteRerunOfEndedJob(const JobCounts& before, const std::string& job) {
  auto it = before.find(job);
  if (it == before.end() || it->second.first == 0) return;
  absl::StatusOr<cli::QueryClient> client = cli::QueryClient::Create(o_.collector, o_.timeout);
  if (!client.ok()) return;
  absl::StatusOr<v1::ListRanksResponse> ranks = client->ListRanks(job);
  if (!ranks.ok()) return;
  uint32_t attempt = 0;  // the workers': $MEMTRACE_ATTEMPT, else torchrun's first (restart 0)
  if (std::optional<std::string> set = EnvNonEmpty(env_, "MEMTRACE_ATTEMPT")) {
    if (!absl::SimpleAtoi(*set, &attempt)) return;  // the agent reports a bad value itself
  }
  std::map<int32_t, uint32_t> highest;  // per rank
  std::map<int32_t, uint32_t> live_at;  // ranks streamed now at another attempt
  std::vector<int32_t> ended;
  size_t rankless_ended = 0;  // processes of an ended run that had no RANK
  for (const v1::RankSummary& r : ranks->ranks()) {
    // A rank's subprocess (stored without its rank) goes with its rank: a rerun's are its own.
    if (r.identity().has_subprocess_of_rank()) continue;
    const int32_t rank = r.identity().rank();
    if (rank < 0) {
      // Without RANK a process is a rank of its own (host, device, pid): this run's processes
      // are new ranks beside it, not its next attempt, whatever the attempt.
      if (!r.connected()) ++rankless_ended;
      continue;
    }
    uint32_t& h = highest[rank];
    h = std::max(h, r.identity().attempt());
    if (r.identity().attempt() != attempt) {
      if (r.connected()) live_at[rank] = r.identity().attempt();
      continue;
    }
    // Connected: running, another node of this run starting first. Neither connected nor
    // complete is a run that crashed or was killed, the commonest reason to run again.
    if (r.connected()) return;
    ended.push_back(rank);
  }
  // A rank another process streams now (another run under the job id, moved to a later
  // attempt) is refused to this run's worker while it runs: the collector gives no new attempt
  // then. Which ranks this run's workers have is not known here (another node's may be those).
  std::vector<int32_t> held, busy;
  for (int32_t rank : ended) (live_at.count(rank) > 0 ? busy : held).push_back(rank);
  if (!busy.empty()) {
    std::sort(busy.begin(), busy.end());
    Warn(absl::StrCat("job ", job, " rank(s) ", absl::StrJoin(busy, ","),
                      " are being recorded now by another process (another run of the job?): "
                      "this run's workers for them, if it has them, are refused while it runs "
                      "(another --job gives the run a job of its own)"));
  }
  if (rankless_ended > 0) {
    Warn(absl::StrCat(
        "job ", job, " already holds ", rankless_ended,
        " process(es) without a RANK from a run that ended: without RANK each process is a rank "
        "of its own (by host, device and pid), so this run's are stored beside them as new ranks, "
        "not as their next attempt, and the analyses compare both runs' processes as one job's "
        "(another --job gives the run a job of its own)"));
  }
  if (held.empty()) return;
  std::sort(held.begin(), held.end());
  std::set<uint32_t> next;
  for (int32_t rank : held) next.insert(highest[rank] + 1);
  const size_t shown = std::min<size_t>(held.size(), 8);
  Say(absl::StrCat("job ", job, " already holds rank(s) ",
                   absl::StrJoin(held.begin(), held.begin() + shown, ","),
                   held.size() > shown ? ",..." : "", " of attempt ", attempt,
                   " from a run that ended: this run's workers for them are stored as ",
                   next.size() == 1 ? absl::StrCat("attempt ", *next.begin())
                                    : std::string("each rank's next attempt"),
                   ", which the analyses read (another --job gives the run a job of its own)"));
}

absl::StatusOr<AgentEnvironment> Runner::PrepareAgent() {
  AgentEnvironment agent;
  if (!o_.no_agent) {
    absl::StatusOr<std::string> lib = FindAgentLibrary(o_.agent_lib, env_, CurrentExecutablePath());
    if (!lib.ok()) {
      return absl::NotFoundError(absl::StrCat(
          lib.status().message(),
          ". Without it nothing is recorded: set MEMTRACE_AGENT_LIB or --agent_lib, or pass "
          "--no_agent to run the job untraced"));
    }
    agent.agent_library = *lib;
    absl::StatusOr<std::string> nvtx = NvtxLibrary(o_.nvtx_lib, env_, *lib);
    if (!nvtx.ok()) return nvtx.status();
    agent.nvtx_library = *nvtx;
  }
  absl::BitGen random;
  agent.job = ChooseJobId(o_.job, env_, absl::Now(), absl::Uniform<uint32_t>(random));
  agent.run_id = absl::StrFormat("%016x", absl::Uniform<uint64_t>(random));
  run_id_ = agent.run_id;
  return agent;
}

absl::Status Runner::ConnectCollector(const sigset_t& child_mask) {
  if (o_.collector.empty()) {
    if (absl::Status s = StartLocalCollector(child_mask); !s.ok()) {
      work_dir_.Remove();
      return absl::Status(s.code(), absl::StrCat("cannot start a local collector: ", s.message()));
    }
    return absl::OkStatus();
  }
  watch_.address = o_.collector;
  absl::Status health = CheckCollector(o_.collector, o_.timeout);
  if (!health.ok()) {
    watch_.reachable_at_start = false;
    watch_.down = true;
    watch_.down_since = absl::Now();
    watch_.last_error = std::string(health.message());
    Warn(absl::StrCat(health.message(),
                      ". Running the job anyway: its agents keep retrying and resend once the "
                      "collector is up, but may drop events if it stays away"));
  }
  return absl::OkStatus();
}

void Runner::AnnounceJob(const JobIdChoice& job, const std::string& workers_job) {
  if (!job.explicit_id.empty()) {
    Say(absl::StrCat("job ", job.explicit_id, " (from ", job.source, ")"));
    return;
  }
  if (!workers_job.empty()) {
    // torchrun gives its workers TORCHELASTIC_RUN_ID = --rdzv_id, which outranks the fallback.
    Say(absl::StrCat("job ", workers_job, " (torchrun's --rdzv_id)"));
    return;
  }
  // The fallback: the user's $MEMTRACE_DEFAULT_JOB_ID, or generated here.
  const std::string origin = job.source == kDefaultJobIdVar
                                 ? absl::StrCat("from ", kDefaultJobIdVar)
                                 : std::string("generated");
  if (!AgentReadsVariable(kDefaultJobIdVar)) {
    Say(absl::StrCat("job ", job.fallback_id, " (", origin, "; pass --job to name it)"));
  } else {
    Say(absl::StrCat("job ", job.fallback_id, " (", origin,
                     "; workers whose launcher names the job, e.g. torchrun's "
                     "TORCHELASTIC_RUN_ID, use that id instead)"));
  }
}

std::optional<JobCounts> Runner::CountJobsBefore() {
  if (watch_.down) return std::nullopt;
  absl::StatusOr<JobCounts> counted = CountJobs(o_.collector);
  if (counted.ok()) return *std::move(counted);
  if (absl::IsUnauthenticated(counted.status()) || absl::IsPermissionDenied(counted.status())) {
    Warn(absl::StrCat("the collector at ", o_.collector, " refuses this token (",
                      counted.status().message(),
                      "); its agents will be refused too and nothing will be recorded: set "
                      "MEMTRACE_TOKEN or MEMTRACE_TOKEN_FILE to the collector's token"));
  } else {
    Warn(absl::StrCat("the collector at ", o_.collector, " does not answer queries (",
                      counted.status().message(),
                      "); what the run records will not be reported at its end"));
  }
  return std::nullopt;
}

void Runner::FinishRun(const std::optional<JobCounts>& before, const std::string& own_job) {
  if (local_ == nullptr) Tick();  // one last look, so an outage at the very end is seen
  ReportCollectorAtEnd();
  const bool collector_up = local_ != nullptr ? !local_died_status_.has_value() : !watch_.down;
  if (collector_up && before.has_value()) ReportRecorded(*before, own_job);
  if (local_ != nullptr) StopLocalCollector();
  // A collector that died is explained by its log, which the warning above names: keep it.
  if (local_died_status_.has_value()) {
    work_dir_.Keep();
  } else {
    work_dir_.Remove();
  }
}

void Runner::StopLocalCollector() {
  if (!local_died_status_.has_value()) {
    int stopped = local_->Stop(absl::Seconds(10));
    if (!(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) &&
        !(WIFSIGNALED(stopped) && WTERMSIG(stopped) == SIGTERM)) {
      Warn(absl::StrCat("the local collector did not stop cleanly: ", DescribeWaitStatus(stopped),
                        "; its log ends: ", local_->LogTail(400)));
    } else {
      Say(absl::StrCat("local collector stopped; data kept in ", data_dir_,
                       " (query it with: memtrace-collector --data ", data_dir_,
                       " and memtrace jobs)"));
    }
  }
  local_.reset();
}

absl::Status Runner::CheckInheritedSettings() const {
  // The workers inherit them: a value the agent refuses leaves every worker without an
  // identity, untraced, which the run then reported as "did the job use the GPU?".
  if (absl::Status s = CheckIdentityOverrides(env_); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(), ": every worker's agent would refuse its identity"));
  }
  return absl::OkStatus();
}

absl::Status Runner::ChooseCollectorAddress() {
  const bool from_env = o_.collector.empty();
  if (from_env) o_.collector = EnvNonEmpty(env_, "MEMTRACE_COLLECTOR").value_or("");
  // The local collector's address: checked here, a usage error, rather than by the collector,
  // whose refusal read as a problem with the data directory.
  if (o_.collector.empty()) return connect::SplitHostPort("--listen", o_.listen).status();
  // A collector given: the local collector's flags do nothing. Said, not dropped without a word.
  const bool data = !o_.data_dir.empty(), listen = o_.listen != RunOptions().listen;
  if (data || listen) {
    Warn(absl::StrCat(data && listen ? "--data and --listen apply"
                      : data         ? "--data applies"
                                     : "--listen applies",
                      " to a local collector, and this run records to ", o_.collector, " (",
                      from_env ? "$MEMTRACE_COLLECTOR" : "--collector", "): ignored"));
  }
  // gRPC would dial "head:99999" on another port and report it unreachable.
  return connect::CheckCollectorAddress(from_env ? "MEMTRACE_COLLECTOR" : "--collector",
                                        o_.collector);
}

int Runner::PrintDryRun(AgentEnvironment agent) {
  agent.collector = o_.collector;
  // Quoted for a shell, so that the lines can be pasted (or eval'd) to run the job by hand.
  // Without a collector there is no address to give (the local one's port is chosen when it
  // starts): a comment says so, rather than a value the agent would refuse.
  if (o_.collector.empty()) {
    io_.out << "# MEMTRACE_COLLECTOR: none given; memtrace run would start a local collector. "
               "Set it to HOST:PORT of a running one to run these lines by hand\n";
  }
  // Exported: set only as shell variables, the command run by hand never saw them.
  io_.out << "# exported: run these lines in a subshell ( ... ) or a script, not a login shell, "
             "where they would stay set for every later program\n";
  for (const auto& [name, value] : ToVariables(agent)) {
    io_.out << "export " << name << "=" << cli::ShellWord(value) << "\n";
  }
  io_.out << absl::StrJoin(command_, " ", [](std::string* out, const std::string& word) {
    out->append(cli::ShellWord(word));
  }) << "\n";
  return cli::kExitOk;
}

void Runner::AbandonStart() {
  if (local_ != nullptr) local_->Stop(absl::Seconds(5));
  work_dir_.Remove();
}

absl::StatusOr<pid_t> Runner::StartJob(const AgentEnvironment& agent, const sigset_t& child_mask,
                                       JobGroup job_group) {
  SpawnOptions spawn;
  spawn.argv = command_;
  spawn.env = ToVariables(agent);
  spawn.signal_mask = child_mask;
  spawn.new_process_group = job_group == JobGroup::kOwn;
  // In a group of its own the job no longer dies with memtrace run's group (a scheduler's
  // final SIGKILL to the group): it must not run on untraced and unsupervised.
  spawn.die_with_parent = job_group == JobGroup::kOwn;
  io_.err.flush();
  job_started_ = absl::Now();
  return Spawn(spawn);
}

int Runner::SuperviseToTheEnd(pid_t job, JobGroup job_group, const ScopedSignalBlock& signals) {
  SuperviseOptions supervise;
  supervise.job_group = job_group;
  if (job_group == JobGroup::kShared) supervise.hangup_senders = {getppid(), getsid(0)};
  supervise.tick =
      local_ != nullptr ? std::min(o_.health_interval, absl::Seconds(1)) : o_.health_interval;
  supervise.on_tick = [this] { Tick(); };
  // A shell starts a background job (`memtrace run ... &` in a script) with SIGINT and SIGQUIT
  // ignored, and the job inherits that: passed on, they do nothing, which the line must not
  // hide ("passed signal 2 on to the job" while it ran to its end).
  std::set<int> ignored;
  for (int sig : {SIGINT, SIGQUIT}) {
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
      ignored.insert(sig);
    }
  }
  supervise.on_forward = [this, ignored](int sig, pid_t from) {
    Say(absl::StrCat("passed signal ", sig, " (", strsignal(sig), ") from pid ", from,
                     " on to the job",
                     ignored.count(sig) > 0
                         ? " (which ignores it: it was ignored when memtrace run started, as in "
                           "a shell's background job; SIGTERM stops it)"
                         : ""));
  };
  return SuperviseJob(job, signals, supervise);
}

int Runner::Run() {
  // Before anything else: a missing command is the user's typo, report it like a shell does.
  std::string path = EnvNonEmpty(env_, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  if (absl::StatusOr<std::string> program = ResolveCommand(command_[0], path); !program.ok()) {
    io_.err << "memtrace run: " << program.status().message() << "\n" << std::flush;
    return ExitCodeForStartFailure(program.status());
  }

  // Blocked before any gRPC thread exists, so that every thread inherits the mask.
  ScopedSignalBlock signals;

  absl::StatusOr<AgentEnvironment> agent = PrepareAgent();
  if (!agent.ok()) return Fail(agent.status());
  if (absl::Status s = CheckInheritedSettings(); !s.ok()) {
    io_.err << "memtrace run: " << s.message() << "\n" << std::flush;
    return cli::kExitUsage;
  }
  if (absl::Status s = ChooseCollectorAddress(); !s.ok()) {
    io_.err << "memtrace run: " << s.message() << "\n" << std::flush;
    return cli::kExitUsage;
  }
  if (o_.dry_run) return PrintDryRun(*agent);

  if (absl::Status s = ConnectCollector(signals.original_mask()); !s.ok()) return Fail(s);
  agent->collector = o_.collector;
  // The job the workers record into, when this run knows it.
  const std::string workers_job =
      !agent->job.explicit_id.empty() ? agent->job.explicit_id : TorchrunRendezvousId(command_);
  AnnounceJob(agent->job, workers_job);
  if (agent->agent_library.empty()) Warn("--no_agent: the job runs untraced");
  const std::optional<JobCounts> before = CountJobsBefore();
  if (before.has_value() && !workers_job.empty()) NoteRerunOfEndedJob(*before, workers_job);

  if (std::optional<int> stop = signals.TakeStopRequest()) {
    // Ctrl-C (or a TERM) while the collector was starting: the user stopped the run before
    // the job existed. Starting it now would lose that.
    io_.err << "memtrace run: " << strsignal(*stop) << " before the job started: not starting it\n"
            << std::flush;
    AbandonStart();
    return 128 + *stop;
  }
  const JobGroup job_group = ChooseJobGroup();
  absl::StatusOr<pid_t> job = StartJob(*agent, signals.original_mask(), job_group);
  if (!job.ok()) {
    io_.err << "memtrace run: " << job.status().message() << "\n" << std::flush;
    AbandonStart();
    return ExitCodeForStartFailure(job.status());
  }
  const int status = SuperviseToTheEnd(*job, job_group, signals);
  FinishRun(before, workers_job);
  const int code = ExitCodeOf(status);
  if (WIFSIGNALED(status)) {
    Say(absl::StrCat("the job was ", DescribeWaitStatus(status), "; exit code ", code));
  }
  return code;
}

}  // namespace

cli::Command RunCommand() {
  cli::Command command;
  command.name = kName;
  command.summary = "run a job (torchrun, mpirun, srun, python ...) with the agent injected";
  command.usage = kUsage;
  command.run = [](const std::vector<std::string>& args, CommandIo& io) {
    cli::Command self;  // for ParseCommandLine's help text
    self.name = kName;
    self.usage = kUsage;
    RunOptions options;
    RunFlags flags;
    Register(flags, &options);
    SplitArguments split = SplitRunArguments(args, flags.with_values);
    if (std::optional<int> done = cli::ParseCommandLine(self, flags.flags, split.flags, io)) {
      return *done;
    }
    if (split.command.empty()) {
      return cli::ReportError(
          io, absl::InvalidArgumentError("no command to run (memtrace run [flags] -- COMMAND ...)"),
          kName);
    }
    if (options.health_interval <= absl::ZeroDuration() ||
        options.timeout <= absl::ZeroDuration()) {
      return cli::ReportError(
          io, absl::InvalidArgumentError("--timeout and --health_interval must be positive"),
          kName);
    }
    Runner runner(std::move(options), std::move(split.command), io);
    return runner.Run();
  };
  return command;
}

}  // namespace memtrace::launch
