#include "collector/server/analysis_service.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collector/rollup/saturating.h"
#include "collector/server/analysis_loader.h"
#include "collector/server/parallel_for.h"
#include "collector/server/status_util.h"
#include "collector/server/subprocess_live.h"
#include "collector/server/timeline_cache.h"
#include "query/analysis/bucket_windows.h"
#include "query/analysis/compare.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/live.h"
#include "query/analysis/peak.h"
#include "query/analysis/report_proto.h"
#include "query/analysis/units.h"

namespace memtrace::collector {
namespace {

namespace an = ::memtrace::analysis;

absl::Status RequireJob(const std::string& job_id, absl::string_view field = "job_id") {
  if (!job_id.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
}

using Timeline = std::shared_ptr<const an::JobTimeline>;

// Two jobs on time buckets (no step markers, or --axis time) whose windows of whole steps came
// out different (8 and 5 buckets for two runs of one setup, bucket_windows.h) are compared in
// one window, the wider: compare read "8s vs 5s time buckets, changed" and every rate per
// bucket in other units. So are jobs stored at other bucket widths (--bucket_ms 250 and 1000),
// in the wider window rounded up to a whole number of both jobs' buckets: as stored, one
// leak's rate read 128 MiB/bucket beside 256, "changed".
absl::Status OneWindowForBoth(TimelineCache& cache, const EventStore& store,
                              const std::string& job_a, const std::string& job_b,
                              v1::TimelineAxis axis, std::shared_ptr<const an::JobTimeline>* a,
                              std::shared_ptr<const an::JobTimeline>* b) {
  if (!(*a)->time_axis || !(*b)->time_axis || (*a)->bucket_ns == (*b)->bucket_ns) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<const an::JobTimeline>> raw_a =
      cache.GetUnwindowed(store, job_a, axis);
  if (!raw_a.ok()) return raw_a.status();
  absl::StatusOr<std::shared_ptr<const an::JobTimeline>> raw_b =
      cache.GetUnwindowed(store, job_b, axis);
  if (!raw_b.ok()) return raw_b.status();
  const an::JobTimeline& ra = **raw_a;
  const an::JobTimeline& rb = **raw_b;
  if (!ra.time_axis || !rb.time_axis) return absl::OkStatus();
  // Windows start at multiples of their width since the epoch (InStepWindows), so that two
  // jobs' windows of one width line up whatever their buckets.
  const int64_t window_ns = an::CommonWindowNs(
      ra.bucket_ns, rb.bucket_ns,
      std::max(an::StepWindowOf(ra) * ra.bucket_ns, an::StepWindowOf(rb) * rb.bucket_ns));
  // Widths with no small common multiple stay as they are: compare says so.
  if (window_ns == 0) return absl::OkStatus();
  *a = std::make_shared<const an::JobTimeline>(an::InStepWindows(ra, window_ns / ra.bucket_ns));
  *b = std::make_shared<const an::JobTimeline>(an::InStepWindows(rb, window_ns / rb.bucket_ns));
  return absl::OkStatus();
}

// `detail`: kScalars for the analyses that look at one number per rank and step (diverged,
// headroom, growth by rank): read from the series, a fraction of the rows' bytes.
absl::StatusOr<Timeline> Load(TimelineCache& cache, const EventStore& store,
                              const std::string& job_id, absl::string_view field,
                              v1::TimelineAxis axis, RollupDetail detail = RollupDetail::kFull) {
  if (absl::Status s = RequireJob(job_id, field); !s.ok()) return s;
  return cache.Get(store, job_id, axis, detail);
}

// The job's ranks' subprocesses as the ranks of a timeline (analysis_loader.h, StreamSet), or
// its ranks from the cache. Not cached: a request for them is the rare one, and the cache's
// versions follow the ranks alone.
absl::StatusOr<Timeline> LoadStreams(TimelineCache& cache, const EventStore& store,
                                     const std::string& job_id, v1::TimelineAxis axis,
                                     RollupDetail detail, const StreamSet& streams) {
  if (!streams.subprocesses) return Load(cache, store, job_id, "job_id", axis, detail);
  if (absl::Status s = RequireJob(job_id); !s.ok()) return s;
  absl::StatusOr<an::JobTimeline> job =
      LoadJobTimeline(store, job_id, axis, detail, StepWindows::kChosen, streams);
  if (!job.ok()) return job.status();
  return std::make_shared<const an::JobTimeline>(*std::move(job));
}

absl::StatusOr<std::shared_ptr<const an::JobStepMetrics>> LoadStepMetrics(
    TimelineCache& cache, const EventStore& store, const std::string& job_id, v1::TimelineAxis axis,
    const StreamSet& streams) {
  if (!streams.subprocesses) return cache.GetStepMetrics(store, job_id, axis);
  absl::StatusOr<an::JobStepMetrics> job = LoadJobStepMetrics(store, job_id, axis, streams);
  if (!job.ok()) return job.status();
  return std::make_shared<const an::JobStepMetrics>(*std::move(job));
}

// The rows of `rank` that SelectRanks compares (latest attempt unless `attempt`), in a
// JobTimeline or a JobStepMetrics.
template <typename Job>
auto FindRank(const Job& job, uint32_t rank, std::optional<uint32_t> attempt)
    -> typename decltype(an::SelectRanks(job, attempt))::value_type {
  for (const auto* r : an::SelectRanks(job, attempt)) {
    if (r->rank == rank) return r;
  }
  return nullptr;
}

template <typename Job>
absl::Status UnknownRank(const EventStore& store, const Job& job, uint32_t rank,
                         std::optional<uint32_t> attempt) {
  // A rank's subprocess has a number of its own in `memtrace ranks`, but is no rank to analyse.
  if (absl::StatusOr<std::vector<v1::RankSummary>> streams = store.ListRanks(job.job_id);
      streams.ok()) {
    if (const v1::RankSummary* s = FindSubprocessStream(*streams, rank)) {
      return absl::NotFoundError(
          absl::StrCat("job \"", job.job_id, "\" stream ", rank, " is no rank: it is pid ",
                       s->identity().pid(), ", ",
                       an::FormatSubprocessOf(s->identity().subprocess_of_rank(),
                                              s->identity().started_the_rank()),
                       ", which the analyses leave out; `memtrace live --rank ", rank,
                       "` and `memtrace timeline --rank ", rank, "` show its own memory"));
    }
  }
  return absl::NotFoundError(
      attempt.has_value()
          ? absl::StrCat("job \"", job.job_id, "\" has no rank ", rank, " attempt ", *attempt)
          : absl::StrCat("job \"", job.job_id, "\" has no rank ", rank));
}

// NOT_FOUND when `attempt` is set and no rank of `job` (a JobTimeline or JobStepMetrics) ran it:
// an analysis of no ranks would answer "nothing found" to a mistyped attempt.
template <typename Job>
absl::Status RequireAttempt(const Job& job, std::optional<uint32_t> attempt) {
  if (!attempt.has_value() || !an::SelectRanks(job, attempt).empty()) return absl::OkStatus();
  std::set<uint32_t> attempts;
  for (const auto& r : job.ranks) attempts.insert(r.attempt);
  return absl::NotFoundError(absl::StrCat(
      "job \"", job.job_id, "\" has no attempt ", *attempt,
      attempts.empty() ? " (it has no ranks)"
                       : absl::StrCat(" (its attempts: ", absl::StrJoin(attempts, ", "), ")")));
}

// The moment `step` of `rank` ended: just before the marker of the next step (the marker's
// event belongs to the next step, and a closed step's end_ns is that marker's time), or everything
// stored for the rank's last step (the one in progress, of a running rank). nullopt when the rank
// has no such step. Step rows come in the
// collector's clock (EventStore::VisitRollups), and so does the moment.
std::optional<LivePoint> StepEnd(const an::RankStepMetrics& rank, int64_t step) {
  for (size_t i = 0; i < rank.row_count(); ++i) {
    if (rank.step_at(i) != step) continue;
    LivePoint point;
    if (i + 1 < rank.row_count()) {
      point.kind = LivePoint::Kind::kAtCollectorTime;
      point.at_ns = rank.start_at(i + 1) - 1;
    }
    return point;
  }
  return std::nullopt;
}

// Says in the report's sentence which time buckets were compared: standing in for missing
// step markers, or asked for. Either way they may be windows of whole steps (bucket_windows.h),
// whose width --warmup and --persistence then count in.
template <typename Job>  // a JobTimeline or JobStepMetrics
void NoteAxis(const Job& job, v1::TimelineAxis asked, std::string* message) {
  if (!job.time_axis) return;
  absl::StrAppend(message, message->empty() ? "" : " ", "(",
                  asked == v1::TIMELINE_AXIS_TIME ? "" : "no step markers: ", "compared ",
                  job.bucket_ns / 1'000'000, " ms time buckets)");
}

// One rank's live set to read, and at which moment.
struct LiveSetAsk {
  uint32_t rank;
  uint32_t attempt;
  LivePoint point;
  bool with_phases;
};

// The live sets of `asks`, in their order, read on up to `threads` threads (parallel_for.h):
// each rank's is independent of the others'. Fails with the error of the earliest ask that
// failed.
absl::StatusOr<std::vector<an::RankLiveSet>> LoadLiveSets(const EventStore& store,
                                                          const std::string& job_id,
                                                          const std::vector<LiveSetAsk>& asks,
                                                          int threads) {
  std::vector<an::RankLiveSet> out(asks.size());
  absl::Status s = ParallelFor(asks.size(), threads, [&](size_t i) -> absl::Status {
    const LiveSetAsk& ask = asks[i];
    absl::StatusOr<LoadedLiveSet> set =
        LoadLiveSet(store, job_id, ask.rank, ask.attempt, ask.point, ask.with_phases);
    if (!set.ok()) return set.status();
    out[i] = std::move(set->set);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

// A rank attempt's first step's start (INT64_MAX without steps), and whether it has `step`: of
// its step metrics (live) or its timeline (leaks), its row in progress counted.
int64_t FirstStartNs(const an::RankStepMetrics& r) {
  return r.row_count() > 0 ? r.start_at(0) : INT64_MAX;
}
int64_t FirstStartNs(const an::RankTimeline& r) {
  return r.row_count() > 0 ? r.row(0).start_ns : INT64_MAX;
}
bool HasStep(const an::RankStepMetrics& r, int64_t step) {
  for (size_t i = 0; i < r.row_count(); ++i) {
    if (r.step_at(i) == step) return true;
  }
  return false;
}
bool HasStep(const an::RankTimeline& r, int64_t step) {
  for (size_t i = 0; i < r.row_count(); ++i) {
    if (r.row(i).step == step) return true;
  }
  return false;
}

// Of `latest` (a rank's latest attempt) and the rank's earlier attempts in `job`, the latest
// that holds a moment: `at_ns` (collector time: its first step starts at or before it) and
// `at_step` (it has that step), each when given; any attempt holds no moment. `latest` itself
// when it holds it, or when none does (its error then says why).
template <typename Job, typename Rank>
const Rank* AttemptCovering(const Job& job, const Rank& latest, std::optional<int64_t> at_ns,
                            std::optional<int64_t> at_step) {
  const auto holds = [&](const Rank& r) {
    return (!at_ns.has_value() || FirstStartNs(r) <= *at_ns) &&
           (!at_step.has_value() || HasStep(r, *at_step));
  };
  if (holds(latest)) return &latest;
  const Rank* best = &latest;
  for (const Rank& r : job.ranks) {
    if (r.rank != latest.rank || r.attempt >= latest.attempt || !holds(r)) continue;
    if (best == &latest || r.attempt > best->attempt) best = &r;
  }
  return best;
}

// The subprocesses of launcher rank `rank`'s attempt `attempt` (RankIdentity.subprocess_of_rank;
// stored at the attempt of the rank that started them) that had recorded an event by `at_ns`
// (collector's clock), each read at that moment into `report`: the analyses leave them out as
// ranks, but their memory is on the rank's device all the same (a vLLM engine's pool beside the
// trainer's). Another run's (attempt's) are not that device's at that moment.
// `streams`: the job's (ListRanks).
absl::Status AddSubprocesses(const EventStore& store, const std::string& job_id,
                             const std::vector<v1::RankSummary>& streams, uint32_t rank,
                             uint32_t attempt, int64_t at_ns, v1::LiveReport* report) {
  for (const v1::RankSummary& s : streams) {
    const v1::RankIdentity& id = s.identity();
    if (!id.has_subprocess_of_rank() || id.subprocess_of_rank() != static_cast<int64_t>(rank) ||
        id.attempt() != attempt || s.events_stored() == 0) {
      continue;
    }
    if (FirstEventNs(s) > at_ns) continue;  // started after the moment
    LivePoint point;
    point.kind = LivePoint::Kind::kAtCollectorTime;
    point.at_ns = at_ns;
    absl::StatusOr<LoadedLiveSet> live =
        LoadLiveSet(store, job_id, s.rank(), id.attempt(), point, /*with_phases=*/false);
    if (live.ok() && live->seq == 0) continue;
    // A damaged stream is said in its place below; a store that could not answer (UNAVAILABLE:
    // an I/O error, busy) fails the report, to be asked again.
    if (!live.ok() && !absl::IsDataLoss(live.status())) return live.status();
    v1::SubprocessLive* out = report->add_subprocesses();
    out->set_rank(s.rank());
    out->set_pid(id.pid());
    out->set_started_the_rank(id.started_the_rank());
    if (!live.ok()) {
      // Said in its place: one damaged subprocess stream (DATA_LOSS) failed the whole report,
      // and with it the rank's own live set, what an OOM's question is about.
      out->set_unread(live.status().ToString());
      continue;
    }
    out->set_live_bytes(live->live_bytes);
    out->set_allocation_count(live->set.allocations.size());
    out->set_at_ns(live->set.at_ns);
  }
  return absl::OkStatus();
}

// An AttemptsNote's entry for a stream not read that ran out of memory: its first OOM in the
// collector's clock, as the reports' times; a rank's subprocess with its rank.
v1::UnreadOom UnreadOomOf(const v1::RankSummary& stream) {
  v1::UnreadOom oom;
  oom.set_rank(stream.rank());
  oom.set_attempt(stream.identity().attempt());
  oom.set_first_oom_ns(SaturatingAdd(stream.first_oom_ts_ns(), stream.clock().offset_ns()));
  if (stream.identity().has_subprocess_of_rank()) {
    oom.set_subprocess_of_rank(static_cast<uint32_t>(stream.identity().subprocess_of_rank()));
  }
  return oom;
}

// Which attempts a report of `job_id` read, when the job has more than one: `asked`, else
// `at_moment`'s (rank -> the attempt running at the moment asked) when given, else each rank's
// latest; the ranks' other attempts, and which of those ran out of memory.
// `job`, the rows loaded (a JobTimeline or JobStepMetrics), says whether the job restarted at all:
// listing its ranks costs a cold `diverged` of 1024 ranks 100 ms more, for nothing to say.
// `only_rank`: the report examined that rank alone (leaks --rank); the others' attempts are not
// its to speak of.
template <typename Job>
absl::Status NoteAttempts(const Job& job, const EventStore& store, const std::string& job_id,
                          std::optional<uint32_t> asked, v1::AttemptsNote* note,
                          const std::map<uint32_t, uint32_t>* at_moment = nullptr,
                          std::optional<uint32_t> only_rank = std::nullopt) {
  if (std::none_of(job.ranks.begin(), job.ranks.end(),
                   [](const auto& rank) { return rank.attempt > 0; })) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = store.ListRanks(job_id);
  if (!ranks.ok()) return ranks.status();
  std::map<uint32_t, uint32_t> latest;  // rank -> its latest attempt
  std::set<uint32_t> attempts;          // restart counts need not be consecutive (0, then 3)
  for (const v1::RankSummary& r : *ranks) {
    if (r.identity().has_subprocess_of_rank()) continue;  // not read by the analyses
    const uint32_t attempt = r.identity().attempt();
    latest[r.rank()] = std::max(latest[r.rank()], attempt);
    attempts.insert(attempt);
  }
  if (attempts.size() < 2) return absl::OkStatus();
  note->set_attempts(static_cast<uint32_t>(attempts.size()));
  if (asked.has_value()) note->set_asked(*asked);
  if (!asked.has_value() && at_moment != nullptr) note->set_at_moment(true);
  std::vector<v1::UnreadOom> ooms;
  for (const v1::RankSummary& r : *ranks) {
    if (r.identity().has_subprocess_of_rank()) continue;
    if (only_rank.has_value() && r.rank() != *only_rank) continue;
    const uint32_t attempt = r.identity().attempt();
    bool read = attempt == latest[r.rank()];
    if (asked.has_value()) {
      read = attempt == *asked;
    } else if (note->at_moment()) {
      const auto running = at_moment->find(r.rank());
      read = running != at_moment->end() && running->second == attempt;
    }
    if (read) continue;
    note->set_unread(note->unread() + 1);
    if (r.ooms() == 0) continue;
    ooms.push_back(UnreadOomOf(r));
  }
  std::sort(ooms.begin(), ooms.end(), [](const v1::UnreadOom& a, const v1::UnreadOom& b) {
    return std::make_pair(a.rank(), a.attempt()) < std::make_pair(b.rank(), b.attempt());
  });
  for (v1::UnreadOom& oom : ooms) *note->add_unread_ooms() = std::move(oom);
  return absl::OkStatus();
}

// As NoteAttempts, for a report of the ranks' subprocesses (StreamSet.subprocesses; `job`, those
// loaded): where they are of more than one attempt, which were read, and the OOMs of those that
// were not (an engine's KV cache that ran out of memory before a restart). `at_ns`: the moment
// the load read at, before which a subprocess begun later could not be read by any attempt.
// `only_rank`: the subprocess the report examined alone; its rank's others are its to speak of.
template <typename Job>
absl::Status NoteSubprocessAttempts(const Job& job, const EventStore& store,
                                    const std::string& job_id, std::optional<uint32_t> asked,
                                    std::optional<int64_t> at_ns, std::optional<uint32_t> only_rank,
                                    v1::AttemptsNote* note) {
  absl::StatusOr<std::vector<v1::RankSummary>> streams = store.ListRanks(job_id);
  if (!streams.ok()) return streams.status();
  std::set<std::pair<uint32_t, uint32_t>> read;  // (stream number, attempt)
  for (const auto& r : job.ranks) read.insert({r.rank, r.attempt});
  // Each subprocess number is one process, of one attempt: the one examined stands for its rank.
  std::optional<int64_t> only_of_rank;
  if (only_rank.has_value()) {
    if (const v1::RankSummary* s = FindSubprocessStream(*streams, *only_rank)) {
      only_of_rank = s->identity().subprocess_of_rank();
    }
  }
  // Those the load could have read (analysis_loader.h, StreamSet).
  std::vector<const v1::RankSummary*> subprocesses;
  std::set<uint32_t> attempts;
  for (const v1::RankSummary& s : *streams) {
    if (!ReadableSubprocess(s, at_ns)) continue;
    subprocesses.push_back(&s);
    attempts.insert(s.identity().attempt());
  }
  if (attempts.size() < 2) return absl::OkStatus();
  note->set_attempts(static_cast<uint32_t>(attempts.size()));
  if (asked.has_value()) {
    note->set_asked(*asked);
  } else if (at_ns.has_value()) {
    note->set_at_moment(true);
  }
  for (const v1::RankSummary* s : subprocesses) {
    const v1::RankIdentity& id = s->identity();
    if (only_of_rank.has_value() && id.subprocess_of_rank() != *only_of_rank) continue;
    if (read.count({s->rank(), id.attempt()}) > 0) continue;
    note->set_unread(note->unread() + 1);
    if (s->ooms() == 0) continue;
    *note->add_unread_ooms() = UnreadOomOf(*s);
  }
  return absl::OkStatus();
}

// NOT_FOUND for `leaks --subprocesses --rank N` where N is none of the subprocesses read (`job`):
// why, for a subprocess left out (of another attempt, begun after --at, or the process that
// started its rank's), else that --rank takes a subprocess's number; and those read.
absl::Status UnreadSubprocess(const EventStore& store, const an::JobTimeline& job,
                              const v1::LeaksRequest& request, std::optional<uint32_t> attempt) {
  std::vector<std::string> read;
  for (const an::RankTimeline* r : an::SelectRanks(job, attempt)) {
    read.push_back(absl::StrCat(r->rank));
  }
  std::string why = "with --subprocesses, --rank takes a subprocess's number in memtrace ranks";
  if (absl::StatusOr<std::vector<v1::RankSummary>> streams = store.ListRanks(request.job_id());
      streams.ok()) {
    if (const v1::RankSummary* s = FindSubprocessStream(*streams, request.rank())) {
      const v1::RankIdentity& id = s->identity();
      why = absl::StrCat("it is pid ", id.pid(), ", ",
                         an::FormatSubprocessOf(id.subprocess_of_rank(), id.started_the_rank()),
                         id.started_the_rank()
                             ? ", which is no engine and is left out"
                             : absl::StrCat(", of attempt ", id.attempt(),
                                            request.has_at_ns() ? ", or begun after --at" : "",
                                            ", which was not read"));
    }
  }
  return absl::NotFoundError(absl::StrCat("job \"", request.job_id(), "\" has no subprocess ",
                                          request.rank(), " among those read (", why,
                                          "; read: ", absl::StrJoin(read, ", "), ")"));
}

// `threads`: how many read the ranks' live sets.
absl::Status RunLeaks(TimelineCache& cache, const EventStore& store, int threads,
                      const v1::LeaksRequest& request, v1::LeakReport* response) {
  an::LeakParams params = an::FromProto(request.params());
  StreamSet streams{request.subprocesses(), params.attempt};
  if (request.has_at_ns()) streams.at_ns = request.at_ns();
  absl::StatusOr<Timeline> loaded =
      LoadStreams(cache, store, request.job_id(), request.axis(), RollupDetail::kFull, streams);
  if (!loaded.ok()) return loaded.status();
  const an::JobTimeline* job = loaded->get();
  if (absl::Status s = RequireAttempt(*job, params.attempt); !s.ok()) return s;
  if (request.has_rank()) {
    params.rank = request.rank();
    if (FindRank(*job, request.rank(), params.attempt) == nullptr) {
      if (!request.subprocesses()) return UnknownRank(store, *job, request.rank(), params.attempt);
      return UnreadSubprocess(store, *job, request, params.attempt);
    }
  }
  LivePoint point;
  if (request.has_at_ns()) {
    point.kind = LivePoint::Kind::kAtCollectorTime;
    point.at_ns = request.at_ns();
    // Before the job's first row there is nothing live to classify: say so, as live --at does.
    // Without --attempt, of any attempt: a time before a restart of every rank is the earlier
    // attempts' (below), not "before the job".
    int64_t first_ns = INT64_MAX;
    for (const an::RankTimeline& rank : job->ranks) {
      if (params.attempt.has_value() && rank.attempt != *params.attempt) continue;
      first_ns = std::min(first_ns, FirstStartNs(rank));
    }
    if (first_ns != INT64_MAX && request.at_ns() < first_ns) {
      return absl::OutOfRangeError(
          absl::StrCat("job \"", request.job_id(), "\"",
                       params.attempt.has_value() ? absl::StrCat(" attempt ", *params.attempt) : "",
                       " has no event at or before ", an::FormatUtcMs(request.at_ns()), "; ",
                       params.attempt.has_value() ? "that attempt" : "it", " starts at ",
                       an::FormatUtcMs(first_ns)));
    }
  }
  std::vector<LiveSetAsk> asks;
  for (const an::RankTimeline* rank : an::SelectRanks(*job, params.attempt)) {
    if (params.rank.has_value() && rank->rank != *params.rank) continue;
    uint32_t attempt = rank->attempt;
    if (request.has_at_ns() && !params.attempt.has_value()) {
      // A rank restarted after the moment is read at the latest attempt that had begun by then:
      // the later one held nothing yet, and its leak went unlisted.
      attempt = AttemptCovering(*job, *rank, std::optional<int64_t>(request.at_ns()), std::nullopt)
                    ->attempt;
    }
    asks.push_back({rank->rank, attempt, point, /*with_phases=*/true});
  }
  absl::StatusOr<std::vector<an::RankLiveSet>> live =
      LoadLiveSets(store, request.job_id(), asks, threads);
  if (!live.ok()) return live.status();
  // At a moment before a restart the curves are the attempts' that ran then, as the live sets
  // are: the latest's curves beside the earlier attempt's candidates read "rank 3 plateau" next
  // to 16.8 GiB of its leak.
  std::map<uint32_t, uint32_t> at_moment;  // rank -> attempt read, for a moment asked
  std::optional<an::JobTimeline> running_then;
  if (request.has_at_ns() && !params.attempt.has_value()) {
    bool earlier = false;
    for (const LiveSetAsk& ask : asks) {
      at_moment[ask.rank] = ask.attempt;
      earlier |= ask.attempt != FindRank(*job, ask.rank, std::nullopt)->attempt;
    }
    if (earlier) {
      running_then.emplace(*job);
      auto& ranks = running_then->ranks;
      ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                                 [&](const an::RankTimeline& r) {
                                   const auto it = at_moment.find(r.rank);
                                   return it != at_moment.end() && it->second != r.attempt;
                                 }),
                  ranks.end());
      job = &*running_then;
    }
  }
  // Candidates count their warm-up in steps, which a time-axis timeline's points are not.
  std::shared_ptr<const an::JobStepMetrics> steps;
  if (job->time_axis) {
    absl::StatusOr<std::shared_ptr<const an::JobStepMetrics>> loaded_steps =
        LoadStepMetrics(cache, store, request.job_id(), v1::TIMELINE_AXIS_STEP, streams);
    if (!loaded_steps.ok()) return loaded_steps.status();
    steps = *std::move(loaded_steps);
  }
  an::ToProto(an::FindLeaks(*job, *live, params, steps.get()), response);
  response->set_job_id(request.job_id());
  response->set_no_step_markers(steps != nullptr && steps->time_axis);
  response->set_subprocesses(request.subprocesses());
  if (request.subprocesses()) {
    return NoteSubprocessAttempts(
        **loaded, store, request.job_id(), params.attempt,
        request.has_at_ns() ? std::optional<int64_t>(request.at_ns()) : std::nullopt, params.rank,
        response->mutable_attempts());
  }
  return NoteAttempts(**loaded, store, request.job_id(), params.attempt,
                      response->mutable_attempts(), request.has_at_ns() ? &at_moment : nullptr,
                      params.rank);
}

// The row in which rank `request.rank()` (the attempt asked for, else its latest) reached its
// highest live bytes, the first of equals: its peak_ns is what `live --at-peak` reads at. The
// step a running rank is in counts: its peak so far was reached, at an event of its own.
absl::StatusOr<an::StepPoint> PeakRow(TimelineCache& cache, const EventStore& store,
                                      const v1::LiveRequest& request) {
  absl::StatusOr<Timeline> job = Load(cache, store, request.job_id(), "job_id",
                                      v1::TIMELINE_AXIS_STEP, RollupDetail::kScalars);
  if (!job.ok()) return job.status();
  std::optional<uint32_t> attempt;
  if (request.has_attempt()) attempt = request.attempt();
  const an::RankTimeline* rank = FindRank(**job, request.rank(), attempt);
  if (rank == nullptr) return UnknownRank(store, **job, request.rank(), attempt);
  const an::StepPoint* peak = nullptr;
  for (size_t i = 0; i < rank->row_count(); ++i) {
    const an::StepPoint& p = rank->row(i);
    if (peak == nullptr || p.peak_bytes > peak->peak_bytes) peak = &p;
  }
  if (peak == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", request.job_id(), "\" rank ", request.rank(),
                                            " has no rollups yet"));
  }
  if (peak->peak_bytes == 0) {
    // Only host memory, or only markers: no moment to read, and no old collector to blame.
    return absl::NotFoundError(absl::StrCat("job \"", request.job_id(), "\" rank ", request.rank(),
                                            " never held device memory: it has no peak"));
  }
  if (peak->peak_ns == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", request.job_id(), "\" rank ", request.rank(),
        "'s rollups were written by a collector that did not keep the moment of their peak; "
        "`memtrace peak --by rank` names the step that held it (--at-step reads its end)"));
  }
  return *peak;
}

// `live` of a rank's subprocess (subprocess_live.h): read alone; a step asked of one without
// steps of its own is its rank's end of it, in the attempt that started it. `streams`: the
// job's (ListRanks).
absl::Status RunSubprocessLive(TimelineCache& cache, const EventStore& store,
                               const v1::LiveRequest& request,
                               const std::vector<v1::RankSummary>& streams,
                               const v1::RankSummary& stream, v1::LiveReport* response) {
  const auto rank_step_end = [&](int64_t step) -> absl::StatusOr<LivePoint> {
    absl::StatusOr<std::shared_ptr<const an::JobStepMetrics>> loaded =
        cache.GetStepMetrics(store, request.job_id(), v1::TIMELINE_AXIS_STEP);
    if (!loaded.ok()) return loaded.status();
    const an::JobStepMetrics& job = **loaded;
    if (job.time_axis) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job \"", request.job_id(), "\" has no step markers: ask for a time, not step ", step));
    }
    const int64_t rank = stream.identity().subprocess_of_rank();
    const an::RankStepMetrics* parent =
        rank < 0 ? nullptr
                 : FindRank(job, static_cast<uint32_t>(rank), stream.identity().attempt());
    std::optional<LivePoint> end;
    if (parent != nullptr) end = StepEnd(*parent, step);
    if (!end.has_value()) {
      return absl::NotFoundError(absl::StrCat(
          "job \"", request.job_id(), "\" rank ", rank,
          stream.identity().attempt() > 0 ? absl::StrCat(" attempt ", stream.identity().attempt())
                                          : "",
          ", whose subprocess stream ", stream.rank(), " is, has no step ", step));
    }
    return *end;
  };
  return DescribeSubprocessLive(store, streams, stream, request, rank_step_end, response);
}

// `subject_through_seq`, nonzero with a time: the subject's set is the state after that event
// (its peak's), the others' at the time.
absl::Status RunLive(TimelineCache& cache, const EventStore& store, int threads,
                     const v1::LiveRequest& request, v1::LiveReport* response,
                     uint64_t subject_through_seq = 0) {
  if (request.rank() >= EventStore::kFirstSyntheticRank) {
    // A rank's subprocess is no rank to compare, but its live set is what the rank's own
    // `live` lists only the size of.
    if (absl::Status s = RequireJob(request.job_id()); !s.ok()) return s;
    absl::StatusOr<std::vector<v1::RankSummary>> streams = store.ListRanks(request.job_id());
    if (!streams.ok()) return streams.status();
    if (const v1::RankSummary* subprocess = FindSubprocessStream(*streams, request.rank())) {
      return RunSubprocessLive(cache, store, request, *streams, *subprocess, response);
    }
  }
  if (request.moment_case() == v1::LiveRequest::kAtPeak) {
    // Read as the time it names: every rank at that moment, as --at.
    v1::LiveRequest at_time = request;
    std::optional<an::StepPoint> peak;
    if (request.at_peak()) {
      absl::StatusOr<an::StepPoint> row = PeakRow(cache, store, request);
      if (!row.ok()) return row.status();
      peak = *std::move(row);
      at_time.set_at_ns(peak->peak_ns);
    } else {
      at_time.clear_moment();
    }
    if (absl::Status s = RunLive(cache, store, threads, at_time, response,
                                 peak.has_value() ? peak->peak_seq : 0);
        !s.ok()) {
      return s;
    }
    if (peak.has_value()) {
      response->set_at_peak(true);
      response->set_peak_bytes(peak->peak_bytes);
      response->set_peak_step(peak->step);
    }
    return absl::OkStatus();
  }
  // The ranks and their steps' start times are all it needs of the rollups: diverged's
  // columns, a fraction of a timeline (a cold whole-job `live` read full timelines first).
  if (absl::Status s = RequireJob(request.job_id()); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<const an::JobStepMetrics>> loaded =
      cache.GetStepMetrics(store, request.job_id(), v1::TIMELINE_AXIS_STEP);
  if (!loaded.ok()) return loaded.status();
  const an::JobStepMetrics* job = loaded->get();
  std::optional<uint32_t> attempt;
  if (request.has_attempt()) attempt = request.attempt();
  const an::RankStepMetrics* subject = FindRank(*job, request.rank(), attempt);
  if (subject == nullptr) return UnknownRank(store, *job, request.rank(), attempt);
  if (!attempt.has_value()) {
    // A moment before the latest attempt began (a time from a log of the crash the restart
    // followed, a step it never reached) is the latest earlier attempt's that has it: "no event
    // at or before" it, or "no step", while attempt 0 had it.
    const an::RankStepMetrics* covering = AttemptCovering(
        *job, *subject,
        request.moment_case() == v1::LiveRequest::kAtNs ? std::optional<int64_t>(request.at_ns())
                                                        : std::nullopt,
        request.moment_case() == v1::LiveRequest::kAtStep
            ? std::optional<int64_t>(request.at_step())
            : std::nullopt);
    // Not for a peak's own event (`subject_through_seq`): a seq of that attempt's stream, which
    // an earlier attempt's replay would take as its own.
    if (covering != subject && subject_through_seq == 0) {
      subject = covering;
      attempt = covering->attempt;
    }
  }

  // The subject's moment first; the other ranks are read at the same time.
  LivePoint point;
  std::optional<an::OomMoment> oom;
  switch (request.moment_case()) {
    case v1::LiveRequest::kAtNs:
      point.kind = LivePoint::Kind::kAtCollectorTime;
      point.at_ns = request.at_ns();
      point.through_seq = subject_through_seq;
      break;
    case v1::LiveRequest::kAtStep: {
      if (job->time_axis) {
        // The job's data, not the command line, is what is missing: a failed request (exit 1).
        return absl::FailedPreconditionError(
            absl::StrCat("job \"", request.job_id(),
                         "\" has no step markers: ask for a time, not step ", request.at_step()));
      }
      std::optional<LivePoint> end = StepEnd(*subject, request.at_step());
      if (!end.has_value()) {
        std::vector<std::string> has;
        if (subject->size() > 0) {
          has.push_back(
              absl::StrCat("its steps: ", subject->step.front(), "..", subject->step.back()));
        }
        if (subject->in_progress) {
          has.push_back(absl::StrCat("step ", subject->in_progress->step,
                                     subject->cut_short ? " cut short" : " in progress"));
        }
        if (!has.empty() && subject->attempt > 0) {
          has.push_back(absl::StrCat("attempt ", subject->attempt));
        }
        return absl::NotFoundError(
            absl::StrCat("job \"", request.job_id(), "\" rank ", request.rank(), " has no step ",
                         request.at_step(),
                         has.empty() ? "" : absl::StrCat(" (", absl::StrJoin(has, ", "), ")")));
      }
      point = *end;
      break;
    }
    case v1::LiveRequest::kAtOom:
      if (request.at_oom()) point.kind = LivePoint::Kind::kFirstOom;
      break;
    case v1::LiveRequest::kAtPeak:  // made a time above
    case v1::LiveRequest::MOMENT_NOT_SET:
      break;
  }
  absl::StatusOr<LoadedLiveSet> mine = LoadLiveSet(store, request.job_id(), subject->rank,
                                                   subject->attempt, point, /*with_phases=*/true);
  bool oom_before_restart = false;
  if (!mine.ok() && absl::IsNotFound(mine.status()) && point.kind == LivePoint::Kind::kFirstOom &&
      !attempt.has_value()) {
    // The latest attempt has no OOM: a restart after the OOM (torchrun's, the usual answer to
    // one) made it. The OOM asked about is the latest earlier attempt's that has one; its
    // attempt's ranks are then the ones compared.
    std::vector<const an::RankStepMetrics*> earlier;
    for (const an::RankStepMetrics& r : job->ranks) {
      if (r.rank == subject->rank && r.attempt < subject->attempt) earlier.push_back(&r);
    }
    std::sort(earlier.begin(), earlier.end(),
              [](const auto* a, const auto* b) { return a->attempt > b->attempt; });
    for (const an::RankStepMetrics* r : earlier) {
      absl::StatusOr<LoadedLiveSet> at_oom =
          LoadLiveSet(store, request.job_id(), r->rank, r->attempt, point, /*with_phases=*/true);
      if (!at_oom.ok() && absl::IsNotFound(at_oom.status())) continue;
      subject = r;
      attempt = r->attempt;
      mine = std::move(at_oom);
      oom_before_restart = true;
      break;
    }
  }
  if (!mine.ok() && absl::IsNotFound(mine.status()) && point.kind == LivePoint::Kind::kFirstOom) {
    // Which ranks have one: "rank 0 has no OOM event" left the user to try each.
    absl::StatusOr<std::vector<v1::RankSummary>> ranks = store.ListRanks(request.job_id());
    if (!ranks.ok()) return ranks.status();
    const bool restarted = std::any_of(ranks->begin(), ranks->end(),
                                       [](const auto& r) { return r.identity().attempt() > 0; });
    std::vector<std::string> with, subprocesses_with;
    for (const v1::RankSummary& r : *ranks) {
      if (r.ooms() == 0) continue;
      if (r.identity().has_subprocess_of_rank()) {
        // An engine's OOM is no rank's, but the news the question was after.
        subprocesses_with.push_back(absl::StrCat("pid ", r.identity().pid(), " of rank ",
                                                 r.identity().subprocess_of_rank(),
                                                 " (memtrace ranks: ", r.rank(), ")"));
        continue;
      }
      with.push_back(restarted ? absl::StrCat(r.rank(), " (attempt ", r.identity().attempt(), ")")
                               : absl::StrCat(r.rank()));
    }
    return absl::NotFoundError(absl::StrCat(
        mine.status().message(),
        with.empty() ? "; no rank of the job has one"
                     : absl::StrCat("; ranks with one: ", absl::StrJoin(with, ", ")),
        subprocesses_with.empty()
            ? ""
            : absl::StrCat("; subprocesses with one: ", absl::StrJoin(subprocesses_with, ", "),
                           " (memtrace timeline --rank N shows one's steps)")));
  }
  if (!mine.ok()) return mine.status();
  if (mine->seq == 0 && point.kind == LivePoint::Kind::kAtCollectorTime) {
    // Nothing to show: an empty set "at step 0 (1970-01-01)" would read as an answer. Its first
    // step is of its first attempt unless one was asked for (it named a restart's).
    int64_t first_ns = INT64_MAX;
    for (const an::RankStepMetrics& r : job->ranks) {
      if (r.rank != subject->rank) continue;
      if (request.has_attempt() && r.attempt != request.attempt()) continue;
      first_ns = std::min(first_ns, FirstStartNs(r));
    }
    return absl::OutOfRangeError(absl::StrCat(
        "job \"", request.job_id(), "\" rank ", request.rank(), " has no event at or before ",
        an::FormatUtcMs(point.at_ns),
        first_ns != INT64_MAX ? absl::StrCat(job->time_axis ? "; its first time bucket starts at "
                                                            : "; its first step starts at ",
                                             an::FormatUtcMs(first_ns))
                              : ""));
  }
  if (point.kind == LivePoint::Kind::kFirstOom) {
    oom = an::OomMoment{mine->set.at_step, mine->set.at_ns, mine->oom_requested_bytes,
                        mine->oom_tag, mine->oom_source};
  }

  // With no moment asked, a subject that stopped before another rank's last step began (it
  // crashed, or ran out of memory) is compared with the others at its own last moment: their
  // latest state is a later point of the job, which made everything it held look like excess.
  // Another rank got further: its last step (or time bucket, or window of them:
  // bucket_windows.h) is a later one than the subject's. Compared by start time, a window's
  // start is up to its width before the rank's last bucket, and a subject that stopped within
  // it went unnoticed.
  // The other ranks of the attempt asked for; without --attempt each rank's latest, moved below
  // to the attempt that held the moment (also when the subject was moved to an earlier attempt:
  // a rank restarted fewer times has no such attempt, and was left out of the comparison).
  const std::vector<const an::RankStepMetrics*> cohort = an::SelectRanks(
      *job, request.has_attempt() ? std::optional<uint32_t>(request.attempt()) : std::nullopt);
  const bool stopped_early =
      request.moment_case() == v1::LiveRequest::MOMENT_NOT_SET && subject->has_rows() &&
      std::any_of(cohort.begin(), cohort.end(), [&](const an::RankStepMetrics* rank) {
        return rank->rank != subject->rank && rank->has_rows() &&
               rank->last_step() > subject->last_step();
      });

  // The other ranks of the same attempt when one was asked for (a restarted job's earlier run),
  // each rank's latest otherwise; of a rank restarted after the moment (a time, or a step its
  // latest attempt never reached), the attempt that held it. One with no attempt begun by a
  // time is left out and counted (others_not_begun).
  // The job's streams, listed once for the reads below that need them.
  absl::StatusOr<std::vector<v1::RankSummary>> summaries = store.ListRanks(request.job_id());
  if (!summaries.ok()) return summaries.status();
  const auto stream_of = [&](const an::RankStepMetrics& rank) -> const v1::RankSummary* {
    for (const v1::RankSummary& s : *summaries) {
      if (s.rank() == rank.rank && s.identity().attempt() == rank.attempt) return &s;
    }
    return nullptr;
  };
  std::vector<LiveSetAsk> asks;
  std::vector<const an::RankStepMetrics*> asked;  // the ranks of `asks`
  uint32_t without_the_step = 0;                  // ranks with rows, but not of that step
  uint32_t not_begun = 0;                         // read at a time before their first event
  for (const an::RankStepMetrics* rank : cohort) {
    if (rank->rank == subject->rank) continue;
    LivePoint at = point;
    at.through_seq = 0;  // the subject's own event; the others are read at its time
    if (point.kind == LivePoint::Kind::kFirstOom || stopped_early) {
      // The subject's moment (its OOM, or its last event) in the collector's clock
      // (LoadLiveSet), read on each rank in its own.
      at.kind = LivePoint::Kind::kAtCollectorTime;
      at.at_ns = mine->set.at_ns;
    }
    if (!request.has_attempt()) {
      // A step S: the attempt running at the subject's end of S that has an S of its own, else
      // the latest with an S (attempts number their steps afresh). Anything else is a time.
      const std::optional<int64_t> at_ns = at.kind == LivePoint::Kind::kAtCollectorTime
                                               ? std::optional<int64_t>(at.at_ns)
                                               : std::nullopt;
      if (request.moment_case() == v1::LiveRequest::kAtStep) {
        // The subject's end of S; of its last step, which has none yet, the moment it was read.
        const an::RankStepMetrics* running = AttemptCovering(
            *job, *rank, at_ns.has_value() ? at_ns : std::optional<int64_t>(mine->set.at_ns),
            request.at_step());
        rank = StepEnd(*running, request.at_step()).has_value()
                   ? running
                   : AttemptCovering(*job, *rank, std::nullopt, request.at_step());
      } else {
        rank = AttemptCovering(*job, *rank, at_ns, std::nullopt);
      }
    }
    if (request.moment_case() == v1::LiveRequest::kAtStep) {
      // Each rank's own end of that step: ranks' clocks differ, their step boundaries agree.
      std::optional<LivePoint> end = StepEnd(*rank, request.at_step());
      if (!end.has_value()) {
        without_the_step += rank->has_rows();
        continue;
      }
      at = *end;
    }
    if (at.kind == LivePoint::Kind::kAtCollectorTime) {
      // A rank that had not begun by then held nothing of its own: compared, its 0 B halved the
      // median of two ranks (traces of one job recorded hours apart, a rank started late).
      const v1::RankSummary* stream = stream_of(*rank);
      if (stream != nullptr && (stream->events_stored() == 0 || FirstEventNs(*stream) > at.at_ns)) {
        ++not_begun;
        continue;
      }
    }
    asks.push_back({rank->rank, rank->attempt, at, /*with_phases=*/false});
    asked.push_back(rank);
  }
  absl::StatusOr<std::vector<an::RankLiveSet>> others =
      LoadLiveSets(store, request.job_id(), asks, threads);
  if (!others.ok()) return others.status();
  an::ToProto(
      an::DescribeLive(request.job_id(), mine->set, *others, an::FromProto(request.params()), oom),
      response);
  response->set_no_step_markers(job->time_axis);
  if (request.moment_case() == v1::LiveRequest::kAtNs && !stopped_early) {
    response->set_asked_ns(request.at_ns());
  }
  // A rank whose stream had ended before the subject's moment (its last event earlier, its
  // connection closed) is read at its last event: its ordinary activations showed as the
  // subject's excess, unexplained. Read at a time (an OOM, a time asked, the subject's last
  // event when it stopped early), by time, not step: a job without step markers has only step
  // 0, and a time an hour after the job ended is in no rank's step. A rank still connected is
  // running, not ended. With no moment asked, a rank whose last step is an earlier one than the
  // subject's (7 ranks crashed at step 40, this one ran on): by time, ranks that finished a job
  // together ended a few ms apart. Read at a step, each rank is read at its own end of it.
  const bool read_at_a_time = point.kind == LivePoint::Kind::kFirstOom || stopped_early ||
                              request.moment_case() == v1::LiveRequest::kAtNs;
  const bool read_at_their_latest = request.moment_case() == v1::LiveRequest::MOMENT_NOT_SET &&
                                    !stopped_early && !job->time_axis && subject->has_rows();
  if ((read_at_a_time || read_at_their_latest) && !asked.empty()) {
    const int64_t moment = request.moment_case() == v1::LiveRequest::kAtNs && !stopped_early
                               ? request.at_ns()
                               : mine->set.at_ns;
    uint32_t ended = 0;
    for (const an::RankStepMetrics* rank : asked) {
      const v1::RankSummary* s = stream_of(*rank);
      if (s == nullptr) continue;
      const bool before = read_at_a_time
                              ? LastEventNs(*s) < moment
                              : rank->has_rows() && rank->last_step() < subject->last_step();
      if (!s->connected() && s->events_stored() > 0 && before) ++ended;
    }
    response->set_others_ended_before(ended);
  }
  response->set_others_not_begun(not_begun);
  // Read at a step, the ranks that never reached it are not read: said, rather than a
  // comparison that vanished.
  if (request.moment_case() == v1::LiveRequest::kAtStep) {
    response->set_others_without_the_step(without_the_step);
  }
  response->set_attempt(subject->attempt);
  // The moment is in the step its stream stopped inside: no step's end (RankTimeline::cut_short).
  response->set_at_step_cut_short(subject->cut_short && subject->in_progress.has_value() &&
                                  response->at_step() == subject->in_progress->step &&
                                  !job->time_axis);
  response->set_oom_before_restart(oom_before_restart);
  uint32_t latest = subject->attempt;
  for (const an::RankStepMetrics& r : job->ranks) {
    if (r.rank == subject->rank) latest = std::max(latest, r.attempt);
  }
  response->set_latest_attempt(latest);
  // The moment itself where it is a time (a step's end, a time asked, the peak's), else the
  // subject's last event read (its OOM, its latest).
  return AddSubprocesses(
      store, request.job_id(), *summaries, subject->rank, subject->attempt,
      point.kind == LivePoint::Kind::kAtCollectorTime ? point.at_ns : mine->set.at_ns, response);
}

}  // namespace

grpc::Status AnalysisService::Diverged(grpc::ServerContext*, const v1::DivergedRequest* request,
                                       v1::DivergenceReport* response) {
  if (absl::Status s = RequireJob(request->job_id()); !s.ok()) return ToGrpcStatus(s);
  const an::DivergenceParams params = an::FromProto(request->params());
  // Only the columns it compares: a fraction of a timeline's memory, which a cold call first
  // touches (docs/PERFORMANCE.md).
  absl::StatusOr<std::shared_ptr<const an::JobStepMetrics>> job =
      LoadStepMetrics(cache_, *store_, request->job_id(), request->axis(),
                      StreamSet{request->subprocesses(), params.attempt});
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = RequireAttempt(**job, params.attempt); !s.ok()) return ToGrpcStatus(s);
  an::DivergenceReport report = an::FindDivergence(**job, params);
  NoteAxis(**job, request->axis(), &report.message);
  an::ToProto(report, response);
  response->set_subprocesses(request->subprocesses());
  if (request->subprocesses()) {
    return ToGrpcStatus(NoteSubprocessAttempts(**job, *store_, request->job_id(), params.attempt,
                                               /*at_ns=*/std::nullopt, std::nullopt,
                                               response->mutable_attempts()));
  }
  return ToGrpcStatus(NoteAttempts(**job, *store_, request->job_id(), params.attempt,
                                   response->mutable_attempts()));
}

grpc::Status AnalysisService::Growth(grpc::ServerContext*, const v1::GrowthRequest* request,
                                     v1::GrowthReport* response) {
  const an::GrowthParams params = an::FromProto(request->params());
  absl::StatusOr<Timeline> job =
      LoadStreams(cache_, *store_, request->job_id(), request->axis(),
                  params.by == an::GrowthBy::kRank ? RollupDetail::kScalars : RollupDetail::kFull,
                  StreamSet{request->subprocesses(), params.attempt});
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = RequireAttempt(**job, params.attempt); !s.ok()) return ToGrpcStatus(s);
  an::ToProto(an::FindGrowth(**job, params), response);
  response->set_subprocesses(request->subprocesses());
  if (request->subprocesses()) {
    return ToGrpcStatus(NoteSubprocessAttempts(**job, *store_, request->job_id(), params.attempt,
                                               /*at_ns=*/std::nullopt, std::nullopt,
                                               response->mutable_attempts()));
  }
  return ToGrpcStatus(NoteAttempts(**job, *store_, request->job_id(), params.attempt,
                                   response->mutable_attempts()));
}

grpc::Status AnalysisService::Leaks(grpc::ServerContext*, const v1::LeaksRequest* request,
                                    v1::LeakReport* response) {
  return ToGrpcStatus(RunLeaks(cache_, *store_, query_threads_, *request, response));
}

grpc::Status AnalysisService::Live(grpc::ServerContext*, const v1::LiveRequest* request,
                                   v1::LiveReport* response) {
  return ToGrpcStatus(RunLive(cache_, *store_, query_threads_, *request, response));
}

grpc::Status AnalysisService::Peak(grpc::ServerContext*, const v1::PeakRequest* request,
                                   v1::PeakReport* response) {
  const an::PeakParams params = an::FromProto(request->params());
  absl::StatusOr<Timeline> job =
      LoadStreams(cache_, *store_, request->job_id(), request->axis(), RollupDetail::kFull,
                  StreamSet{request->subprocesses(), params.attempt});
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = RequireAttempt(**job, params.attempt); !s.ok()) return ToGrpcStatus(s);
  an::ToProto(an::FindPeaks(**job, params), response);
  response->set_subprocesses(request->subprocesses());
  if (request->subprocesses()) {
    return ToGrpcStatus(NoteSubprocessAttempts(**job, *store_, request->job_id(), params.attempt,
                                               /*at_ns=*/std::nullopt, std::nullopt,
                                               response->mutable_attempts()));
  }
  return ToGrpcStatus(NoteAttempts(**job, *store_, request->job_id(), params.attempt,
                                   response->mutable_attempts()));
}

grpc::Status AnalysisService::Headroom(grpc::ServerContext*, const v1::HeadroomRequest* request,
                                       v1::HeadroomReport* response) {
  const an::HeadroomParams params = an::FromProto(request->params());
  absl::StatusOr<Timeline> job =
      LoadStreams(cache_, *store_, request->job_id(), request->axis(), RollupDetail::kScalars,
                  StreamSet{request->subprocesses(), params.attempt});
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = an::CheckHeadroomParams(params); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = RequireAttempt(**job, params.attempt); !s.ok()) return ToGrpcStatus(s);
  an::ToProto(an::ForecastHeadroom(**job, params), response);
  response->set_subprocesses(request->subprocesses());
  if (request->subprocesses()) {
    return ToGrpcStatus(NoteSubprocessAttempts(**job, *store_, request->job_id(), params.attempt,
                                               /*at_ns=*/std::nullopt, std::nullopt,
                                               response->mutable_attempts()));
  }
  return ToGrpcStatus(NoteAttempts(**job, *store_, request->job_id(), params.attempt,
                                   response->mutable_attempts()));
}

grpc::Status AnalysisService::Compare(grpc::ServerContext*, const v1::CompareRequest* request,
                                      v1::CompareReport* response) {
  absl::StatusOr<Timeline> a = Load(cache_, *store_, request->job_a(), "job_a", request->axis());
  if (!a.ok()) return ToGrpcStatus(a.status());
  absl::StatusOr<Timeline> b = Load(cache_, *store_, request->job_b(), "job_b", request->axis());
  if (!b.ok()) return ToGrpcStatus(b.status());
  // One job with step markers, one without: the other is read by step and this one by time
  // bucket, and every rate and forecast differs in its units alone (the same leak read "128
  // MiB/step" vs "64.0 MiB/bucket", changed). Both are read by time then, as --axis time does.
  v1::TimelineAxis axis = request->axis();
  std::string no_markers;  // the job without step markers, when only one has none
  if ((*a)->time_axis != (*b)->time_axis) {
    no_markers = (*a)->time_axis ? request->job_a() : request->job_b();
    axis = v1::TIMELINE_AXIS_TIME;
    a = Load(cache_, *store_, request->job_a(), "job_a", axis);
    if (!a.ok()) return ToGrpcStatus(a.status());
    b = Load(cache_, *store_, request->job_b(), "job_b", axis);
    if (!b.ok()) return ToGrpcStatus(b.status());
  }
  if (absl::Status s =
          OneWindowForBoth(cache_, *store_, request->job_a(), request->job_b(), axis, &*a, &*b);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  const an::CompareParams params = an::FromProto(request->params());
  // One column, one attempt: the note under it (below) names the attempt it read.
  for (const std::optional<uint32_t>& attempt : {params.growth.attempt, params.leaks.attempt,
                                                 params.peak.attempt, params.headroom.attempt}) {
    if (attempt != params.diverged.attempt) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "compare reads one attempt of each job for every analysis: the "
                          "analyses' params ask for different attempts");
    }
  }
  for (const Timeline* job : {&*a, &*b}) {
    if (absl::Status s = RequireAttempt(**job, params.diverged.attempt); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  an::ToProto(an::CompareJobs(**a, **b, params), response);
  // A restarted job's column reads its latest attempt, and says so, as each analysis does.
  if (absl::Status s = NoteAttempts(**a, *store_, request->job_a(), params.diverged.attempt,
                                    response->mutable_a()->mutable_attempts());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = NoteAttempts(**b, *store_, request->job_b(), params.diverged.attempt,
                                    response->mutable_b()->mutable_attempts());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!no_markers.empty()) {
    for (v1::CompareItem& item : *response->mutable_items()) {
      if (item.analysis() != "axis") continue;
      item.set_subject(
          absl::StrCat("compared by (", no_markers, " has no step markers: both read by time)"));
    }
  }
  return grpc::Status::OK;
}

}  // namespace memtrace::collector
