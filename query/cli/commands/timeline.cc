#include "query/cli/commands/timeline.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "query/analysis/timeline.h"
#include "query/analysis/units.h"
#include "query/cli/query_client.h"
#include "query/cli/time_arg.h"

namespace memtrace::cli {
namespace {

constexpr char kUsage[] =
    "Usage: memtrace timeline --job JOB [--rank R|LIST] [--from T --to T] [--by step|time]\n"
    "                         [--steps A:B] [--every N] [--wide [--value floor|peak|end]]\n"
    "\n"
    "Per-rank live bytes from the collector's rollups: for each step (--by step, the default)\n"
    "or time bucket (--by time) the floor (lowest), peak (highest) and end (last) live bytes\n"
    "and how much end changed since the rank's step (or bucket) before, printed or not (none\n"
    "for a rank's first, or the first in the --from / --to window, whose step before is not\n"
    "fetched). A rising end/floor on one rank is a leak on that rank; a high peak with a\n"
    "flat floor is a spike. A job without step markers is shown by time bucket unless --by is\n"
    "given (a note on stderr says so). A running rank's last row (its agent is still\n"
    "connected) is in progress, its floor and peak so far: an in_progress column marks it, and\n"
    "the analyses compare ranks without it until it ends (a peak or OOM in it still counts).\n"
    "On steps, an ended rank's last step that its stream stopped well inside (less than half\n"
    "its steps' usual length in: a job an OOM ended stops every rank mid-step) is cut short:\n"
    "a cut_short column marks it, its end is where the stream stopped, not a step's end, and\n"
    "the analyses read it as a row in progress.\n"
    "\n"
    "Times (--from, --to): ns since the epoch, now, now-15m, -90s (= now-90s), now+1h, or\n"
    "RFC 3339 (2026-12-02T16:54:03Z), or a time as memtrace prints it (2026-12-02\n"
    "16:54:03.250, UTC). --steps, --every and --wide only shape what is printed.";

bool InKeyRange(int64_t key, const TimelineView& view) {
  return (!view.first_key || key >= *view.first_key) && (!view.last_key || key <= *view.last_key);
}

// The positions in rank.points() of the points that the view shows, in order.
std::vector<int> ShownPoints(const v1::RankTimelineProto& rank, const TimelineView& view) {
  std::vector<int> in_range;
  for (int i = 0; i < rank.points_size(); ++i) {
    if (InKeyRange(rank.points(i).key(), view)) in_range.push_back(i);
  }
  if (view.every <= 1) return in_range;
  std::vector<int> shown;
  for (size_t i = 0; i < in_range.size(); ++i) {
    if (i % view.every == 0 || i + 1 == in_range.size()) shown.push_back(in_range[i]);
  }
  return shown;
}

uint64_t PointValue(const v1::TimelinePoint& point, TimelineValue value) {
  switch (value) {
    case TimelineValue::kFloor:
      return point.floor_bytes();
    case TimelineValue::kPeak:
      return point.peak_bytes();
    case TimelineValue::kEnd:
      break;
  }
  return point.end_bytes();
}

std::string KeyColumn(const TimelineView& view) {
  return view.axis == v1::TIMELINE_AXIS_TIME ? "bucket" : "step";
}

Table LongTable(const v1::TimelineResponse& response, const TimelineView& view) {
  bool any_attempt = false;
  bool any_in_progress = false;
  bool any_cut_short = false;
  for (const v1::RankTimelineProto& rank : response.ranks()) {
    any_attempt |= rank.attempt() != 0;
    any_in_progress |= rank.last_point_in_progress();
    any_cut_short |= rank.last_point_cut_short();
  }
  std::vector<Column> columns = {{"rank", ColumnType::kInt}};
  if (any_attempt) columns.push_back({"attempt", ColumnType::kInt});
  columns.insert(columns.end(), {{KeyColumn(view), ColumnType::kInt},
                                 {"start", ColumnType::kTimeNs},
                                 {"floor", ColumnType::kBytes},
                                 {"peak", ColumnType::kBytes},
                                 {"end", ColumnType::kBytes},
                                 {"end_change", ColumnType::kSignedBytes}});
  // A running rank's last row: its floor and peak are so far (the analyses leave it out).
  if (any_in_progress) columns.push_back({"in_progress", ColumnType::kBool});
  // An ended rank's last row that its stream stopped inside: its end is no step's end.
  if (any_cut_short) columns.push_back({"cut_short", ColumnType::kBool});
  Table table(std::move(columns));
  for (const v1::RankTimelineProto& rank : response.ranks()) {
    for (int i : ShownPoints(rank, view)) {
      const v1::TimelinePoint* point = &rank.points(i);
      std::vector<Cell> row = {uint64_t{rank.rank()}};
      if (any_attempt) row.push_back(uint64_t{rank.attempt()});
      // From the rank's previous row, shown or not, as the usage says: from the previous shown
      // row, --every 10 read ten steps' change as one step's.
      Cell change;
      if (i > 0) {
        change = static_cast<int64_t>(point->end_bytes() - rank.points(i - 1).end_bytes());
      }
      row.insert(row.end(),
                 {int64_t{point->key()}, int64_t{point->start_ns()}, uint64_t{point->floor_bytes()},
                  uint64_t{point->peak_bytes()}, uint64_t{point->end_bytes()}, change});
      if (any_in_progress) {
        row.push_back(rank.last_point_in_progress() && i + 1 == rank.points_size());
      }
      if (any_cut_short) {
        row.push_back(rank.last_point_cut_short() && i + 1 == rank.points_size());
      }
      table.AddRow(std::move(row));
    }
  }
  return table;
}

Table WideTable(const v1::TimelineResponse& response, const TimelineView& view) {
  std::vector<Column> columns = {{KeyColumn(view), ColumnType::kInt}};
  std::set<int64_t> keys;
  std::vector<std::map<int64_t, uint64_t>> values;
  for (const v1::RankTimelineProto& rank : response.ranks()) {
    columns.push_back({rank.attempt() == 0 ? absl::StrCat("r", rank.rank())
                                           : absl::StrCat("r", rank.rank(), ".", rank.attempt()),
                       ColumnType::kBytes});
    std::map<int64_t, uint64_t>& by_key = values.emplace_back();
    for (const v1::TimelinePoint& point : rank.points()) {
      if (!InKeyRange(point.key(), view)) continue;
      by_key[point.key()] = PointValue(point, view.value);
      keys.insert(point.key());
    }
  }
  Table table(std::move(columns));
  std::vector<int64_t> ordered(keys.begin(), keys.end());
  // --every keeps each rank's last row, as in the long form: a rank that stopped earlier (its
  // last step 59 of a job whose last row is 60, an earlier attempt) showed "-" there instead.
  std::set<int64_t> last_of_a_rank;
  for (const std::map<int64_t, uint64_t>& by_key : values) {
    if (!by_key.empty()) last_of_a_rank.insert(by_key.rbegin()->first);
  }
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (view.every > 1 && i % view.every != 0 && i + 1 != ordered.size() &&
        last_of_a_rank.count(ordered[i]) == 0) {
      continue;
    }
    std::vector<Cell> row = {int64_t{ordered[i]}};
    for (const std::map<int64_t, uint64_t>& by_key : values) {
      auto it = by_key.find(ordered[i]);
      row.push_back(it == by_key.end() ? Cell() : Cell(uint64_t{it->second}));
    }
    table.AddRow(std::move(row));
  }
  return table;
}

struct TimelineArgs {
  std::string job;
  std::set<uint32_t> ranks;  // --rank: empty for every rank
  std::string from;
  std::string to;
  TimelineView view;
  bool by_given = false;     // --by was on the command line: keep that axis whatever the job has
  bool value_given = false;  // --value was: it shapes --wide only
};

// analysis::HasStepMarkers (query/analysis/timeline.h) for the Timeline RPC's answer: some rank
// has more than one step row, or one other than step 0.
bool HasStepMarkers(const v1::TimelineResponse& step_axis) {
  return analysis::internal::HasStepMarkersOf(
      step_axis.ranks(), [](const v1::RankTimelineProto& r) { return r.points_size(); },
      [](const v1::RankTimelineProto& r) { return r.points(0).key(); });
}

// The timeline on --by's axis; without --by, on time buckets when the job has no step markers
// (the analyses fall back the same way), which one line on io.err says. A --rank, --from or
// --to narrower than one step can leave a job with markers one row per rank: the whole job
// decides then.
absl::StatusOr<v1::TimelineResponse> FetchTimeline(const QueryClient& client,
                                                   v1::TimelineRequest request, TimelineArgs& a,
                                                   CommandIo& io) {
  absl::StatusOr<v1::TimelineResponse> response = client.Timeline(request);
  if (!response.ok() || a.by_given || a.view.axis != v1::TIMELINE_AXIS_STEP ||
      response->ranks().empty() || HasStepMarkers(*response)) {
    return response;
  }
  if (request.has_rank() || request.ranks_size() > 0 || request.from_ns() != 0 ||
      request.to_ns() != 0) {
    v1::TimelineRequest whole_job;
    whole_job.set_job_id(request.job_id());
    absl::StatusOr<v1::TimelineResponse> job = client.Timeline(whole_job);
    if (!job.ok()) return job.status();
    if (HasStepMarkers(*job)) return response;
  }
  request.set_axis(v1::TIMELINE_AXIS_TIME);
  absl::StatusOr<v1::TimelineResponse> by_time = client.Timeline(request);
  if (!by_time.ok()) return by_time.status();
  a.view.axis = v1::TIMELINE_AXIS_TIME;
  io.err << "memtrace timeline: job '" << a.job << "' has no step markers: one row per "
         << absl::FormatDuration(absl::Nanoseconds(by_time->bucket_ns()))
         << " time bucket (--by step for its single step)\n";
  return by_time;
}

void RegisterTimelineFlags(FlagSet* flags, TimelineArgs& a) {
  flags->AddString("job", "JOB", "job id (see memtrace jobs); required", &a.job);
  flags->Add("rank", "R|LIST",
             "only this rank, or these: 0-3,17 (a rank beside the cohort); each must be the job's",
             [&a](absl::string_view v) -> absl::Status {
               absl::StatusOr<std::set<uint32_t>> ranks = ParseRankList(v);
               if (!ranks.ok()) return ranks.status();
               a.ranks = *std::move(ranks);
               return absl::OkStatus();
             });
  flags->AddString("from", "T", "only steps/buckets from time T (see Times above)", &a.from);
  flags->AddString("to", "T", "only steps/buckets up to time T", &a.to);
  flags->Add("by", "step|time",
             "one row per step (default; per time bucket when the job has no step markers) or "
             "per time bucket",
             [&a](absl::string_view v) {
               a.by_given = true;
               if (v == "step") {
                 a.view.axis = v1::TIMELINE_AXIS_STEP;
               } else if (v == "time") {
                 a.view.axis = v1::TIMELINE_AXIS_TIME;
               } else {
                 return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not step or time"));
               }
               return absl::OkStatus();
             });
  flags->Add("steps", "A:B",
             "only steps (or bucket numbers: start / bucket width, seconds since the epoch for 1 s "
             "buckets) A..B inclusive; A: and :B are open",
             [&a](absl::string_view v) { return ParseKeyRange(v, &a.view); });
  flags->Add(
      "every", "N", "only every N-th row of each rank, plus its last", [&a](absl::string_view v) {
        if (!absl::SimpleAtoi(v, &a.view.every) || a.view.every < 1) {
          return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a positive integer"));
        }
        return absl::OkStatus();
      });
  flags->AddBool("wide", "one row per step, one column per rank (the --value of each)",
                 &a.view.wide);
  flags->Add(
      "value", "floor|peak|end", "what --wide shows (default end)", [&a](absl::string_view v) {
        a.value_given = true;
        if (v == "floor") {
          a.view.value = TimelineValue::kFloor;
        } else if (v == "peak") {
          a.view.value = TimelineValue::kPeak;
        } else if (v == "end") {
          a.view.value = TimelineValue::kEnd;
        } else {
          return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not floor, peak or end"));
        }
        return absl::OkStatus();
      });
}

// The Timeline request the flags ask for; INVALID_ARGUMENT names a bad --from / --to.
absl::StatusOr<v1::TimelineRequest> TimelineRequestFor(const TimelineArgs& a, absl::Time now) {
  v1::TimelineRequest request;
  request.set_job_id(a.job);
  request.set_axis(a.view.axis);
  // One rank as `rank`, which every collector knows; a list as `ranks`.
  if (a.ranks.size() == 1) {
    request.set_rank(*a.ranks.begin());
  } else {
    for (uint32_t rank : a.ranks) request.add_ranks(rank);
  }
  for (auto [text, name, setter] :
       {std::make_tuple(&a.from, "--from", &v1::TimelineRequest::set_from_ns),
        std::make_tuple(&a.to, "--to", &v1::TimelineRequest::set_to_ns)}) {
    if (text->empty()) continue;
    absl::StatusOr<int64_t> ns = ParseTimeArg(*text, now);
    if (!ns.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", ns.status().message()));
    }
    (request.*setter)(*ns);
  }
  if (request.from_ns() != 0 && request.to_ns() != 0 && request.from_ns() > request.to_ns()) {
    // As times, where ns since the epoch read as noise; with the ns when a millisecond holds both.
    std::string from = analysis::FormatUtcMs(request.from_ns());
    std::string to = analysis::FormatUtcMs(request.to_ns());
    if (from == to) {
      absl::StrAppend(&from, ", ", request.from_ns(), " ns");
      absl::StrAppend(&to, ", ", request.to_ns(), " ns");
    }
    return absl::InvalidArgumentError(absl::StrCat("--from (", from, ") is after --to (", to, ")"));
  }
  return request;
}

int RunTimeline(const Command& self, const std::vector<std::string>& args, CommandIo& io) {
  FlagSet flags;
  CommonOptions common;
  TimelineArgs a;
  RegisterTimelineFlags(&flags, a);
  AddCommonFlags(io, flags, &common);
  if (std::optional<int> exit = ParseCommandLine(self, flags, args, io)) return *exit;
  if (a.job.empty()) {
    return ReportError(io, absl::InvalidArgumentError("--job is required"), "timeline");
  }
  if (a.value_given && !a.view.wide) {
    // The long table shows floor, peak and end already; the flag would change nothing.
    return ReportError(io, absl::InvalidArgumentError("--value applies to --wide only"),
                       "timeline");
  }
  absl::StatusOr<v1::TimelineRequest> request = TimelineRequestFor(a, io.now);
  if (!request.ok()) return ReportError(io, request.status(), "timeline");
  absl::StatusOr<QueryClient> client = QueryClient::Create(common.collector, common.timeout);
  if (!client.ok()) return ReportError(io, client.status(), "timeline");
  absl::StatusOr<v1::TimelineResponse> response = FetchTimeline(*client, *request, a, io);
  if (!response.ok()) return ReportError(io, response.status(), "timeline");
  if (!a.ranks.empty()) {
    // A collector from before TimelineRequest.ranks answers a list with every rank but the
    // subprocesses: only those asked for are shown, and one it lacks is named as a newer
    // collector names it (NOT_FOUND), not left out in silence.
    auto* ranks = response->mutable_ranks();
    ranks->erase(std::remove_if(
                     ranks->begin(), ranks->end(),
                     [&a](const v1::RankTimelineProto& r) { return a.ranks.count(r.rank()) == 0; }),
                 ranks->end());
    std::set<uint32_t> missing = a.ranks;
    for (const v1::RankTimelineProto& r : *ranks) missing.erase(r.rank());
    if (!missing.empty()) {
      return ReportError(
          io, absl::NotFoundError(absl::StrCat(
                  "job '", a.job, "' has no rank", missing.size() == 1 ? " " : "s ",
                  analysis::FormatRankList({missing.begin(), missing.end()}, 16), " at ",
                  common.collector,
                  " (a collector older than this CLI lists a subprocess only asked for alone)")));
    }
  }
  if (response->ranks().empty()) {
    return ReportError(io, absl::NotFoundError(absl::StrCat("job '", a.job, "' has no timeline at ",
                                                            common.collector)));
  }
  const Table table = TimelineTable(*response, a.view);
  if (table.rows().empty()) {
    // A bare header read as an answer ("nothing happened"): say why there is none, naming only
    // the flags that were given.
    const bool by_steps = a.view.first_key.has_value() || a.view.last_key.has_value();
    const bool by_time = !a.from.empty() || !a.to.empty();
    const bool on_buckets = a.view.axis == v1::TIMELINE_AXIS_TIME;
    if (!by_steps && !by_time) {
      io.err << "memtrace timeline: job '" << a.job << "' has no "
             << (on_buckets ? "time bucket" : "step") << " yet\n";
    } else {
      std::vector<std::string> why;
      if (by_steps) {
        why.push_back(
            on_buckets
                ? "--steps on time buckets selects bucket numbers, a bucket's start / its width"
                : "--steps selects step numbers");
      }
      if (by_time) why.push_back("--from / --to select steps or buckets that overlap the window");
      io.err << "memtrace timeline: no row of job '" << a.job << "' in the selection ("
             << absl::StrJoin(why, "; ") << ")\n";
    }
  }
  if (a.view.wide) {
    // The long form has a column for it.
    std::vector<std::string> running;
    for (const v1::RankTimelineProto& rank : response->ranks()) {
      if (rank.last_point_in_progress()) running.push_back(absl::StrCat(rank.rank()));
    }
    if (!running.empty()) {
      io.err << "memtrace timeline: the last row of rank(s) " << absl::StrJoin(running, ",")
             << " is still in progress (the agent is connected): its floor and peak are so far\n";
    }
    std::vector<uint32_t> cut;
    for (const v1::RankTimelineProto& rank : response->ranks()) {
      if (rank.last_point_cut_short()) cut.push_back(rank.rank());
    }
    if (!cut.empty()) {
      io.err << "memtrace timeline: the last row of rank(s) " << analysis::FormatRankList(cut, 16)
             << " was cut short (its stream ended well inside it): its end is where the "
                "stream stopped, not a step's end\n";
    }
  }
  WriteTable(table, common.format, io.out);
  return kExitOk;
}

}  // namespace

absl::Status ParseKeyRange(absl::string_view text, TimelineView* view) {
  auto bad = [&text]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a step range (A:B, A:, :B or A, of non-negative integers)"));
  };
  size_t colon = text.find(':');
  absl::string_view first = text.substr(0, colon);
  absl::string_view last = colon == absl::string_view::npos ? first : text.substr(colon + 1);
  int64_t value = 0;
  std::optional<int64_t> a, b;
  // Step numbers and bucket indices are never negative: "-5" selected nothing and "-5:3" meant
  // "0:3", where every other count flag refuses a negative.
  if (!first.empty()) {
    if (!absl::SimpleAtoi(first, &value) || value < 0) return bad();
    a = value;
  }
  if (!last.empty()) {
    if (!absl::SimpleAtoi(last, &value) || value < 0) return bad();
    b = value;
  }
  if ((!a && !b) || (a && b && *a > *b)) return bad();
  view->first_key = a;
  view->last_key = b;
  return absl::OkStatus();
}

Table TimelineTable(const v1::TimelineResponse& response, const TimelineView& view) {
  return view.wide ? WideTable(response, view) : LongTable(response, view);
}

Command TimelineCommand() {
  Command command{"timeline", "per-rank live bytes (floor, peak, end) per step or time bucket",
                  kUsage, nullptr};
  command.run = [self = command](const std::vector<std::string>& args, CommandIo& io) {
    return RunTimeline(self, args, io);
  };
  return command;
}

}  // namespace memtrace::cli
