// memtrace-sim: a workload SIMULATOR. Plays a synthetic FSDP-style training job of N ranks
// through the real agent transport into a real collector. No GPU, no PyTorch: every event is
// made up (see tools/sim/workload.h), and says so (launcher "simulator").
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/connect/client_channel.h"
#include "query/cli/flags.h"
#include "query/cli/output.h"
#include "query/cli/text_escape.h"
#include "tools/sim/rank_report.h"
#include "tools/sim/recording_sink.h"
#include "tools/sim/runner.h"
#include "tools/sim/workload.h"

namespace memtrace::sim {
namespace {

constexpr char kPrefix[] = "memtrace-sim [SIMULATOR]: ";

constexpr char kUsage[] =
    "memtrace-sim [SIMULATOR]: plays a synthetic FSDP-style training job of N ranks through\n"
    "memtrace-sim [SIMULATOR]: the real agent transport into a real memtrace collector.\n"
    "memtrace-sim [SIMULATOR]: No GPU is used and no real program runs: every event is\n"
    "memtrace-sim [SIMULATOR]: simulated, and each rank reports launcher \"simulator\".\n"
    "memtrace-sim [SIMULATOR]:\n"
    "memtrace-sim [SIMULATOR]: Usage: memtrace-sim [flags]\n"
    "memtrace-sim [SIMULATOR]: Example (a leak on rank 5 from step 30):\n"
    "memtrace-sim [SIMULATOR]:   memtrace-sim --collector 127.0.0.1:7431 --leak_rank 5\n"
    "memtrace-sim [SIMULATOR]:\n"
    "memtrace-sim [SIMULATOR]: Flags:\n";

void Log(const std::string& line) { std::cout << kPrefix << line << std::endl; }

int Fail(const absl::Status& status) {
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::cerr << kPrefix << message << std::endl;
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

std::string DefaultCollector() {
  const char* env = std::getenv("MEMTRACE_COLLECTOR");
  return env != nullptr && *env != '\0' ? env : "127.0.0.1:7431";
}

// Registers an int flag that stores into an int or an optional<int>.
void AddIntFlag(cli::FlagSet& flags, std::string name, std::string help, int* target) {
  flags.Add(name, "N", std::move(help), [target](absl::string_view v) {
    if (!absl::SimpleAtoi(v, target)) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer"));
    }
    return absl::OkStatus();
  });
}

void AddOptionalIntFlag(cli::FlagSet& flags, std::string name, std::string help,
                        std::optional<int>* target) {
  flags.Add(name, "R", std::move(help), [target](absl::string_view v) {
    int value = 0;
    if (!absl::SimpleAtoi(v, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer"));
    }
    *target = value;
    return absl::OkStatus();
  });
}

std::string DescribeScenario(const WorkloadOptions& w, const WorkloadPlan& plan) {
  std::vector<std::string> parts;
  if (w.oom_rank) {
    parts.push_back(absl::StrCat("OOM on rank ", *w.oom_rank, " in step ", w.oom_step,
                                 " after a leak from step ", plan.leak_from_step, " of ",
                                 cli::FormatBytes(plan.leak_bytes_per_step), "/step (tag ",
                                 w.leak_tag, ")"));
  } else if (plan.leak_rank) {
    std::string leak =
        absl::StrCat("leak on rank ", *plan.leak_rank, " from step ", plan.leak_from_step, ", +",
                     cli::FormatBytes(plan.leak_bytes_per_step), "/step (tag ", w.leak_tag, ")");
    for (const WorkloadOptions::Leak& more : plan.also_leak) {
      absl::StrAppend(&leak, ", and on rank ", more.rank, " from step ", more.from_step);
    }
    parts.push_back(leak);
  }
  if (w.grad_accum) {
    parts.push_back(absl::StrCat("gradient accumulation on every rank, +",
                                 cli::FormatBytes(SegmentBytes(w.grad_accum_bytes_per_step)),
                                 "/step (tag fsdp:grads)"));
  }
  if (w.spikes) {
    parts.push_back(absl::StrCat("healthy spikes of ", cli::FormatBytes(w.spike_bytes), " every ",
                                 w.spike_period, " steps"));
  }
  if (w.phases) {
    parts.push_back(w.rollout_leak ? absl::StrCat("RL phases, rollout keeps ",
                                                  cli::FormatBytes(w.rollout_leak_bytes),
                                                  " of KV cache per step (tag rollout:kv_cache)")
                                   : "RL phases rollout / weight_sync / actor_update");
  }
  if (!w.step_markers) parts.push_back("no step markers");
  if (w.clock_skew_per_node_ns != 0) {
    parts.push_back(
        absl::StrCat("node k's clock ahead by k x ",
                     absl::FormatDuration(absl::Nanoseconds(w.clock_skew_per_node_ns))));
  }
  if (parts.empty()) return "none (a healthy job)";
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&out, i ? "; " : "", parts[i]);
  return out;
}

// The command line: the simulation's options and the flags given in other units than the
// options hold them (durations, a start time as text).
struct SimFlags {
  SimulationOptions options;
  std::string start;
  absl::Duration step = absl::Seconds(1);
  absl::Duration skew = absl::ZeroDuration();
  absl::Duration drain = SimulationOptions().drain_timeout;
  bool no_step_markers = false;
};

void RegisterFlags(cli::FlagSet* flags, SimFlags* f) {
  WorkloadOptions& w = f->options.workload;
  flags->AddString("collector", "ADDR",
                   "collector host:port (default $MEMTRACE_COLLECTOR or 127.0.0.1:7431)",
                   &f->options.collector_address);
  flags->AddString("job", "JOB", "job id (default sim-<UTC time>)", &f->options.job_id);
  AddIntFlag(*flags, "ranks", "ranks to simulate (default 8)", &w.ranks);
  AddIntFlag(*flags, "ranks_per_node", "ranks per simulated host sim-node-<k> (default 8)",
             &w.ranks_per_node);
  flags->AddInt("steps", "N", "training steps (default 100)", &w.steps);
  flags->Add("seed", "N", "seed of the size and time jitter (default 1)",
             [w = &w](absl::string_view v) {
               if (!absl::SimpleAtoi(v, &w->seed)) {
                 return absl::InvalidArgumentError(
                     absl::StrCat("'", v, "' is not a non-negative integer"));
               }
               return absl::OkStatus();
             });
  flags->Add(
      "events_per_rank", "N",
      "approximate events per rank over the run; scales the layers (default 20000)",
      [w = &w](absl::string_view v) {
        if (!absl::SimpleAtoi(v, &w->events_per_rank) || w->events_per_rank == 0) {
          return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a positive integer"));
        }
        return absl::OkStatus();
      });
  AddIntFlag(*flags, "layers", "model layers (default 0: derived from --events_per_rank)",
             &w.layers);
  flags->AddDuration("step", "DURATION", "simulated time per step (default 1s)", &f->step);
  flags->AddString("start", "NS",
                   "simulated time of step 0 in ns since the epoch (default: now - steps * step, "
                   "or now with --speed); no step may be stamped more than 10m after it is sent",
                   &f->start);
  flags->Add("speed", "X",
             "0: as fast as possible (default); 1: simulated time runs at wall-clock speed",
             [f](absl::string_view v) {
               if (!absl::SimpleAtod(v, &f->options.speed) || !std::isfinite(f->options.speed) ||
                   f->options.speed < 0) {
                 return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a number >= 0"));
               }
               return absl::OkStatus();
             });
  AddOptionalIntFlag(*flags, "leak_rank", "plant a leak on this rank (not with --oom_rank)",
                     &w.leak_rank);
  flags->AddInt("leak_from_step", "S", "first step of the leak (default 30)", &w.leak_from_step);
  flags->AddBytes("leak_bytes_per_step", "BYTES",
                  "leak per step, one allocation rounded as PyTorch's caching allocator would "
                  "(<= 1MiB: 2MiB, < 10MiB: 20MiB, else up to 2MiB; default 256MiB)",
                  &w.leak_bytes_per_step);
  flags->AddRepeatable(
      "also_leak", "RANK:STEP",
      "another rank that leaks as --leak_rank does, from STEP (repeatable; needs --leak_rank, "
      "not with --oom_rank)",
      [w = &w](absl::string_view v) {
        std::vector<absl::string_view> parts = absl::StrSplit(v, ':');
        WorkloadOptions::Leak leak;
        if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &leak.rank) ||
            !absl::SimpleAtoi(parts[1], &leak.from_step)) {
          return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not RANK:STEP"));
        }
        w->also_leak.push_back(leak);
        return absl::OkStatus();
      });
  flags->AddString("leak_tag", "TAG", "tag of the leaked allocations (default leak:cache)",
                   &w.leak_tag);
  flags->AddBool("grad_accum", "gradients kept across steps: every rank grows (no zero_grad)",
                 &w.grad_accum);
  flags->AddBytes("grad_accum_bytes_per_step", "BYTES", "growth per step (default 64MiB)",
                  &w.grad_accum_bytes_per_step);
  flags->AddBool("spikes", "periodic activation spikes (healthy: the floor stays flat)", &w.spikes);
  flags->AddInt("spike_period", "N", "a spike every N steps (default 10)", &w.spike_period);
  flags->AddBytes("spike_bytes", "BYTES", "size of a spike (default 8GiB)", &w.spike_bytes);
  AddOptionalIntFlag(*flags, "oom_rank", "this rank leaks until an allocation fails (OOM event)",
                     &w.oom_rank);
  flags->AddInt("oom_step", "S", "the step whose allocation fails (default 80)", &w.oom_step);
  flags->AddBool("phases", "RL-style steps: rollout / weight_sync / actor_update phases",
                 &w.phases);
  flags->AddBool("rollout_leak", "with --phases: rollout KV cache stays live into training",
                 &w.rollout_leak);
  flags->AddBytes("device_bytes", "BYTES", "simulated device memory (default 80GiB)",
                  &w.device_total_bytes);
  flags->AddBool("no_step_markers",
                 "record no step markers (the collector then compares ranks by time bucket)",
                 &f->no_step_markers);
  flags->AddDuration("clock_skew_per_node", "DURATION",
                     "node k's clock runs k x this ahead of true time (default 0; at most 1h)",
                     &f->skew);
  flags->AddDuration("drain_timeout", "DURATION",
                     "how long each rank waits for its events to become durable at the end, and, once "
                     "per run, for a collector that stops acknowledging mid-run before it drops "
                     "what does not fit its queue as lost (default 60s)",
                     &f->drain);
}

// Fills in what the flags leave to be derived: the workload's step and clock settings, a job id,
// and step 0's time. INVALID_ARGUMENT for a bad --start.
absl::Status ResolveOptions(SimFlags* f, absl::Time now) {
  SimulationOptions& options = f->options;
  WorkloadOptions& w = options.workload;
  options.drain_timeout = f->drain;
  w.step_ns = absl::ToInt64Nanoseconds(f->step);
  w.step_markers = !f->no_step_markers;
  w.clock_skew_per_node_ns = absl::ToInt64Nanoseconds(f->skew);
  if (options.job_id.empty()) {
    options.job_id =
        absl::StrCat("sim-", absl::FormatTime("%Y%m%d-%H%M%S", now, absl::UTCTimeZone()));
  }
  // As the agents and every other command: a collector that requires a token refused the
  // simulator's streams, UNAUTHENTICATED.
  absl::StatusOr<connect::ClientSecurity> security = connect::ClientSecurityFromEnv();
  if (!security.ok()) return security.status();
  options.channel_factory = connect::ChannelFactoryFor(*std::move(security));
  if (!f->start.empty()) {
    if (!absl::SimpleAtoi(f->start, &w.start_ns) || w.start_ns <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--start: '", f->start, "' is not a positive integer"));
    }
    // Checked on a valid workload only: --steps -5 is reported as that, not as a --start.
    if (absl::Status s = ValidateWorkload(w); !s.ok()) return s;
    // The collector holds a timestamp more than 10 minutes past its arrival as no time
    // (collector/README.md, "Clocks"): a run stamped so would collapse into one instant there.
    // Step k is stamped start + k * step and sent at now + k * step / speed (at now, as fast as
    // possible); the lead is linear in k, so it is largest at step 0 (--speed below 1: sending
    // falls behind the stamps) or at the end of the run (otherwise).
    const absl::Duration run = w.steps * f->step;
    const absl::Time start = absl::FromUnixNanos(w.start_ns);
    const absl::Duration first_lead = start - now;
    const absl::Duration last_lead =
        (start + run) - (options.speed > 0 ? now + run / options.speed : now);
    const bool first_leads_more = first_lead >= last_lead;
    const absl::Duration lead = first_leads_more ? first_lead : last_lead;
    if (lead > absl::Minutes(10)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--start: ", first_leads_more ? "step 0" : "the last step", " would be stamped ",
          absl::FormatDuration(absl::Trunc(lead, absl::Seconds(1))),
          " after it is sent; the collector takes timestamps more than 10m past their arrival "
          "as a clock gone wrong (anomaly time_future)"));
    }
  } else {
    // As fast as possible: the simulated run ends about now, so times look recent.
    w.start_ns = absl::ToUnixNanos(options.speed > 0 ? now : now - w.steps * f->step);
  }
  return absl::OkStatus();
}

// A model too big for the device ends every rank in step 0 with an OOM nobody planted: a run of a
// few thousand events where millions were asked for, reported as a success. Step 0 of rank 0,
// without what was planted, is played into memory to find out (a few thousand events).
absl::Status CheckModelFits(const WorkloadOptions& w, const WorkloadPlan& plan) {
  WorkloadOptions healthy = w;
  healthy.layers = plan.layers;  // derived from events per step, which fewer steps change
  // Two steps: the optimizer's state, made in the first, is live through the second, which is
  // where a model that only just fits step 0 runs out (--ranks 3 --events_per_rank 2000).
  healthy.steps = std::min<int64_t>(w.steps, 2);
  healthy.leak_rank.reset();
  healthy.also_leak.clear();
  healthy.oom_rank.reset();
  healthy.grad_accum = false;
  healthy.rollout_leak_bytes = 0;
  // The step whose allocation fails with `layers`, or nullopt when both steps fit. Options this
  // trimming makes invalid leave the question open (nullopt); the run then reports any OOM.
  const auto oom_step = [&healthy](int layers) -> std::optional<int64_t> {
    WorkloadOptions trial = healthy;
    trial.layers = layers;
    RecordingSink first_steps;
    if (!PlayRank(trial, 0, first_steps).ok()) return std::nullopt;
    int64_t step = 0;
    for (const Event& e : first_steps.events()) {
      if (e.kind == EventKind::kStep) step = static_cast<int64_t>(e.aux);
      if (e.kind == EventKind::kOom) return step;
    }
    return std::nullopt;
  };
  std::optional<int64_t> step = oom_step(plan.layers);
  if (!step.has_value()) return absl::OkStatus();
  // Which way fits depends on the model: few layers make each layer's activations one large
  // working set, many small ones lose most to the allocator's rounding. Try both ways.
  // Nearest first: x2, /2, x4, /4, ... up to 16 times.
  std::optional<int> fitting;
  for (int factor = 2; !fitting && factor <= 16; factor *= 2) {
    for (int layers : {plan.layers * factor, plan.layers / factor}) {
      if (!fitting && layers >= 1 && !oom_step(layers).has_value()) fitting = layers;
    }
  }
  std::string advice;
  if (fitting.has_value()) {
    // Without --layers the layers come from the events per step; with it, only --layers does.
    advice = absl::StrCat(
        "With ", *fitting, " layers it fits: pass --layers ", *fitting,
        w.layers > 0 ? std::string()
                     : absl::StrCat(", or ", *fitting > plan.layers ? "more" : "fewer",
                                    " events per step (--events_per_rank / --steps), which make "
                                    "the layers"),
        "; or more --ranks, or a larger --device_bytes");
  } else {
    advice = "Use more --ranks (the model is sharded over them) or a larger --device_bytes";
  }
  return absl::InvalidArgumentError(absl::StrCat(
      w.layers > 0
          ? absl::StrCat("--layers ", w.layers)
          : absl::StrCat("--events_per_rank ", w.events_per_rank, " over --steps ", w.steps),
      ": step ", *step, " of the simulated model (", plan.layers, " layers, ",
      cli::FormatBytes(plan.resident_bytes), " resident per rank) does not fit --device_bytes ",
      cli::FormatBytes(w.device_total_bytes),
      ": every rank would run out of memory in it, with nothing planted. ", advice,
      "; plant an OOM with --oom_rank"));
}

// One line per rank (RankReport), and the number of ranks that failed.
int ReportRanks(const WorkloadOptions& w, const std::vector<RankOutcome>& outcomes,
                uint64_t* durable) {
  int failed = 0;
  for (const RankOutcome& o : outcomes) {
    const RankReport report = ReportRank(w, o);
    *durable += report.durable;
    failed += o.status.ok() ? 0 : 1;
    Log(report.line);
  }
  return failed;
}

int Main(int argc, char** argv) {
  SimFlags f;
  f.options.collector_address = DefaultCollector();
  cli::FlagSet flags;
  RegisterFlags(&flags, &f);
  absl::StatusOr<cli::FlagSet::Parsed> parsed =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return Fail(parsed.status());
  if (parsed->help) {
    std::cout << kUsage;
    std::string described = flags.Describe();
    for (absl::string_view line : absl::StrSplit(described, '\n', absl::SkipEmpty())) {
      std::cout << kPrefix << line << "\n";
    }
    return 0;
  }
  if (!parsed->positional.empty()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "' (see --help)")));
  }
  if (absl::Status s = ResolveOptions(&f, absl::Now()); !s.ok()) return Fail(s);
  const SimulationOptions& options = f.options;
  const WorkloadOptions& w = options.workload;
  absl::StatusOr<WorkloadPlan> plan = PlanWorkload(w);
  if (!plan.ok()) return Fail(plan.status());
  if (absl::Status s = CheckModelFits(w, *plan); !s.ok()) return Fail(s);

  // --layers sets the events a rank records, not --events_per_rank; an OOM stops the run early.
  Log(absl::StrCat("simulated job '", options.job_id, "': ", w.ranks, " ranks x ",
                   plan->steps_played, " steps",
                   w.oom_rank ? absl::StrCat(" and into step ", w.oom_step, " (of --steps ",
                                             w.steps, ": the OOM in it ends the run)")
                              : "",
                   ", ", plan->layers, " layers",
                   w.layers > 0 ? "" : absl::StrCat(", ~", w.events_per_rank, " events/rank"),
                   ", no GPU involved"));
  Log(absl::StrCat("planted: ", DescribeScenario(w, *plan)));
  const absl::Time began = absl::Now();
  absl::StatusOr<std::vector<RankOutcome>> outcomes = RunSimulation(options, Log);
  if (!outcomes.ok()) return Fail(outcomes.status());
  uint64_t total = 0;
  const int failed = ReportRanks(w, *outcomes, &total);
  const absl::Duration took = absl::Now() - began;
  Log(absl::StrCat(total, " simulated events durable at ", options.collector_address, " in ",
                   absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(1))), " (",
                   static_cast<uint64_t>(total / std::max(absl::ToDoubleSeconds(took), 1e-3)),
                   " events/s)"));
  if (failed > 0) {
    std::cerr << kPrefix << failed << " of " << w.ranks << " ranks failed" << std::endl;
    return 1;
  }
  std::set<uint32_t> attempts;
  for (const RankOutcome& o : *outcomes) {
    if (o.stats.stored_attempt.has_value()) attempts.insert(*o.stats.stored_attempt);
  }
  if (!attempts.empty() && *attempts.rbegin() > 0) {
    // The job id held ranks of an earlier run: the collector stored these as new attempts.
    Log(absl::StrCat("job '", options.job_id,
                     "' already held these ranks from an earlier run: "
                     "stored as attempt ",
                     absl::StrJoin(attempts, ", "), " (the analyses read each rank's latest)"));
  }
  // One shell word, so that the line can be pasted whatever the job id holds.
  const std::string job = cli::ShellWord(options.job_id);
  Log(absl::StrCat("read it back: memtrace ranks --job ", job, "; memtrace timeline --job ", job));
  return 0;
}

}  // namespace
}  // namespace memtrace::sim

int main(int argc, char** argv) { return memtrace::sim::Main(argc, argv); }
