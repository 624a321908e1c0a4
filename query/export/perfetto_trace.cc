#include "query/export/perfetto_trace.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/ostreamwrapper.h"
#include "rapidjson/writer.h"

namespace memtrace::exporter {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::OStreamWrapper>;

constexpr int kStepsTid = 1;
constexpr int kPhasesTid = 2;

std::string RankName(const v1::RankRollups& rank) {
  // A rank's subprocess by its rank and pid: its own number (memtrace ranks) says nothing.
  std::string name =
      rank.identity().has_subprocess_of_rank()
          ? absl::StrCat("rank ", rank.identity().subprocess_of_rank(),
                         rank.identity().started_the_rank() ? " parent pid " : " subprocess pid ",
                         rank.identity().pid())
          : absl::StrCat("rank ", rank.rank());
  if (rank.attempt() > 0) absl::StrAppend(&name, " attempt ", rank.attempt());
  if (!rank.identity().host().empty()) absl::StrAppend(&name, " (", rank.identity().host(), ")");
  return name;
}

// The names of a rank's string table of one kind, by id.
absl::flat_hash_map<uint32_t, std::string> NamesOf(const v1::RankRollups& rank,
                                                   v1::StringKind kind) {
  absl::flat_hash_map<uint32_t, std::string> names;
  for (const v1::StringEntry& s : rank.strings()) {
    if (s.kind() == kind) names[s.id()] = s.value();
  }
  return names;
}

absl::flat_hash_map<uint32_t, std::string> TagNames(const v1::RankRollups& rank) {
  return NamesOf(rank, v1::STRING_KIND_TAG);
}

// The name of string `id` in `names`, "KIND#id" when the table lacks it (its batch was lost).
std::string NameOr(const absl::flat_hash_map<uint32_t, std::string>& names, uint32_t id,
                   absl::string_view kind) {
  auto it = names.find(id);
  return it != names.end() ? it->second : absl::StrCat(kind, "#", id);
}

// The job's top tags: by the most live bytes any rank held under the tag at a step end.
std::vector<std::string> TopTags(const v1::GetRollupsResponse& rollups, size_t n) {
  absl::flat_hash_map<std::string, uint64_t> best;
  for (const v1::RankRollups& rank : rollups.ranks()) {
    absl::flat_hash_map<uint32_t, std::string> names = TagNames(rank);
    for (const v1::StepRollup& step : rank.steps()) {
      for (const v1::GroupBytes& g : step.by_tag()) {
        auto it = names.find(g.id());
        std::string name = it != names.end() ? it->second : absl::StrCat("tag#", g.id());
        uint64_t& b = best[name];
        b = std::max(b, g.live_bytes());
      }
    }
  }
  std::vector<std::pair<uint64_t, std::string>> ranked;
  for (auto& [name, bytes] : best) {
    if (bytes > 0) ranked.push_back({bytes, name});
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> top;
  for (size_t i = 0; i < ranked.size() && i < n; ++i) top.push_back(ranked[i].second);
  return top;
}

class TraceWriter {
 public:
  TraceWriter(JsonWriter& w, int64_t origin_ns) : w_(w), origin_ns_(origin_ns) {}

  void Metadata(int64_t pid, const char* what, int tid, const char* key,
                const std::string& text, int64_t number, bool is_text) {
    w_.StartObject();
    w_.Key("ph");
    w_.String("M");
    w_.Key("name");
    w_.String(what);
    w_.Key("pid");
    w_.Int64(pid);
    w_.Key("tid");
    w_.Int(tid);
    w_.Key("args");
    w_.StartObject();
    w_.Key(key);
    if (is_text) {
      w_.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
    } else {
      w_.Int64(number);
    }
    w_.EndObject();
    w_.EndObject();
  }

  // One counter sample; `series` are (name, value) pairs of one track.
  void Counter(int64_t pid, const std::string& track, int64_t ts_ns,
               std::initializer_list<std::pair<const char*, uint64_t>> series) {
    w_.StartObject();
    w_.Key("ph");
    w_.String("C");
    w_.Key("name");
    w_.String(track.c_str(), static_cast<rapidjson::SizeType>(track.size()));
    w_.Key("pid");
    w_.Int64(pid);
    w_.Key("ts");
    w_.Double(Micros(ts_ns));
    w_.Key("args");
    w_.StartObject();
    for (const auto& [name, value] : series) {
      w_.Key(name);
      w_.Uint64(value);
    }
    w_.EndObject();
    w_.EndObject();
  }

  // A phase run as a pair of async events ("b"/"e", id `id`): runs of phases that do not nest
  // (A begins, B begins, A ends) would be overlapping slices on one thread, which Perfetto does
  // not draw; async runs get lanes of their own.
  void PhaseRun(int64_t pid, const std::string& name, const PhaseSlice& slice, uint64_t id) {
    for (const bool begin : {true, false}) {
      w_.StartObject();
      w_.Key("ph");
      w_.String(begin ? "b" : "e");
      w_.Key("cat");
      w_.String("memtrace.phase");
      w_.Key("name");
      w_.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      w_.Key("id");
      w_.Uint64(id);
      w_.Key("pid");
      w_.Int64(pid);
      w_.Key("tid");
      w_.Int(kPhasesTid);
      w_.Key("ts");
      w_.Double(Micros(begin ? slice.begin_ns : slice.end_ns));
      if (begin && slice.open) {
        w_.Key("args");
        w_.StartObject();
        w_.Key("open");
        w_.Bool(true);  // never ended: drawn to the rank's last event
        w_.EndObject();
      }
      w_.EndObject();
    }
  }

  void Oom(int64_t pid, const OomMark& oom, const std::string& tag, const std::string& source) {
    w_.StartObject();
    w_.Key("ph");
    w_.String("i");
    w_.Key("s");
    w_.String("p");  // across the rank's whole process track
    w_.Key("cat");
    w_.String("memtrace.oom");
    w_.Key("name");
    w_.String("OOM");
    w_.Key("pid");
    w_.Int64(pid);
    w_.Key("tid");
    w_.Int(kStepsTid);
    w_.Key("ts");
    w_.Double(Micros(oom.ts_ns));
    w_.Key("args");
    w_.StartObject();
    w_.Key("requested_bytes");
    w_.Uint64(oom.requested_bytes);
    if (!tag.empty()) {
      w_.Key("tag");
      w_.String(tag.c_str(), static_cast<rapidjson::SizeType>(tag.size()));
    }
    if (!source.empty()) {
      w_.Key("source");
      w_.String(source.c_str(), static_cast<rapidjson::SizeType>(source.size()));
    }
    w_.EndObject();
    w_.EndObject();
  }

  void StepSlice(int64_t pid, const v1::StepRollup& step, bool time_axis) {
    w_.StartObject();
    w_.Key("ph");
    w_.String("X");
    w_.Key("cat");
    w_.String("memtrace.step");
    std::string name = absl::StrCat(time_axis ? "bucket " : "step ", step.step());
    w_.Key("name");
    w_.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
    w_.Key("pid");
    w_.Int64(pid);
    w_.Key("tid");
    w_.Int(kStepsTid);
    w_.Key("ts");
    w_.Double(Micros(step.start_ns()));
    w_.Key("dur");
    w_.Double(step.end_ns() > step.start_ns() ? (step.end_ns() - step.start_ns()) / 1000.0 : 0.0);
    w_.Key("args");
    w_.StartObject();
    auto field = [&](const char* key, uint64_t value) {
      w_.Key(key);
      w_.Uint64(value);
    };
    w_.Key("step");
    w_.Int64(step.step());
    field("start_bytes", step.start_bytes());
    field("floor_bytes", step.floor_bytes());
    field("peak_bytes", step.peak_bytes());
    // When live bytes first reached the peak, on the trace's own µs axis (as "ts"), so that it
    // can be found on the live-bytes track. 0 (unknown: a row written before it was kept) is
    // left out rather than shown as the trace's origin.
    if (step.peak_ns() != 0) {
      w_.Key("peak_ts_us");
      w_.Double(Micros(step.peak_ns()));
    }
    field("end_bytes", step.end_bytes());
    field("allocs", step.allocs());
    field("frees", step.frees());
    field("alloc_bytes", step.alloc_bytes());
    field("free_bytes", step.free_bytes());
    if (step.device_used_max() > 0) field("device_used_max", step.device_used_max());
    if (step.ooms() > 0) field("ooms", step.ooms());
    if (step.events_lost() > 0) field("events_lost", step.events_lost());
    w_.EndObject();
    w_.EndObject();
  }

 private:
  double Micros(int64_t ts_ns) const { return (ts_ns - origin_ns_) / 1000.0; }

  JsonWriter& w_;
  int64_t origin_ns_;
};

int64_t TimeOrigin(const v1::GetRollupsResponse& rollups, const FineSeriesMap& fine) {
  int64_t origin = INT64_MAX;
  for (const v1::RankRollups& rank : rollups.ranks()) {
    for (const v1::StepRollup& step : rank.steps()) {
      if (step.start_ns() != 0) origin = std::min(origin, step.start_ns());
    }
  }
  for (const auto& [key, series] : fine) {
    if (!series.live.empty()) origin = std::min(origin, series.live.front().ts_ns);
    if (!series.device_used.empty()) origin = std::min(origin, series.device_used.front().ts_ns);
    for (const PhaseSlice& p : series.phases) origin = std::min(origin, p.begin_ns);
    for (const OomMark& m : series.ooms) origin = std::min(origin, m.ts_ns);
  }
  return origin == INT64_MAX ? 0 : origin;
}

}  // namespace

int64_t TracePid(uint32_t rank, uint32_t attempt) {
  // Launcher ranks are below 1000000 and the store numbers subprocesses and rankless workers
  // from it: one attempt's ranks all stay within its 10000000 (at 100000 per attempt, a
  // subprocess of attempt 0 shared its pid with rank 0's attempt 10).
  return static_cast<int64_t>(rank) + int64_t{10'000'000} * attempt;
}

std::vector<int64_t> TracePids(const v1::GetRollupsResponse& rollups) {
  std::vector<int64_t> pids;
  pids.reserve(rollups.ranks_size());
  bool fit = true;
  for (const v1::RankRollups& rank : rollups.ranks()) {
    pids.push_back(TracePid(rank.rank(), rank.attempt()));
    fit = fit && pids.back() <= int64_t{UINT32_MAX};
  }
  if (fit) return pids;
  std::vector<int> order(rollups.ranks_size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const v1::RankRollups& x = rollups.ranks(a);
    const v1::RankRollups& y = rollups.ranks(b);
    return std::make_pair(x.attempt(), x.rank()) < std::make_pair(y.attempt(), y.rank());
  });
  for (size_t i = 0; i < order.size(); ++i) pids[order[i]] = static_cast<int64_t>(i) + 1;
  return pids;
}

absl::Status WritePerfettoTrace(const std::string& job_id, const v1::GetRollupsResponse& rollups,
                                const FineSeriesMap& fine, const PerfettoOptions& options,
                                std::ostream& out) {
  rapidjson::OStreamWrapper stream(out);
  JsonWriter w(stream);
  const int64_t origin = TimeOrigin(rollups, fine);
  const bool time_axis = options.time_axis;
  const std::vector<std::string> top_tags = TopTags(rollups, options.top_tags);
  TraceWriter trace(w, origin);
  uint64_t phase_run_id = 0;  // unique over the trace: async ids pair "b" with "e"

  w.StartObject();
  w.Key("displayTimeUnit");
  w.String("ms");
  w.Key("otherData");
  w.StartObject();
  w.Key("job");
  w.String(job_id.c_str(), static_cast<rapidjson::SizeType>(job_id.size()));
  w.Key("exporter");
  w.String("memtrace export --format perfetto");
  w.Key("time_origin_ns");
  w.Int64(origin);
  w.EndObject();
  w.Key("traceEvents");
  w.StartArray();
  const std::vector<int64_t> pids = TracePids(rollups);
  for (int i = 0; i < rollups.ranks_size(); ++i) {
    const v1::RankRollups& rank = rollups.ranks(i);
    const int64_t pid = pids[i];
    trace.Metadata(pid, "process_name", 0, "name", RankName(rank), 0, true);
    trace.Metadata(pid, "process_sort_index", 0, "sort_index", "", pid, false);
    trace.Metadata(pid, "thread_name", kStepsTid, "name", time_axis ? "time buckets" : "steps",
                   0, true);
    for (const v1::StepRollup& step : rank.steps()) trace.StepSlice(pid, step, time_axis);

    auto it = fine.find({rank.rank(), rank.attempt()});
    const FineSeries* series = it != fine.end() ? &it->second : nullptr;
    if (series != nullptr && !series->phases.empty()) {
      const auto phases = NamesOf(rank, v1::STRING_KIND_PHASE);
      for (const PhaseSlice& slice : series->phases) {
        trace.PhaseRun(pid, NameOr(phases, slice.phase_id, "phase"), slice, ++phase_run_id);
      }
    }
    if (series != nullptr && !series->ooms.empty()) {
      const auto tags = TagNames(rank);
      const auto sources = NamesOf(rank, v1::STRING_KIND_SOURCE);
      for (const OomMark& oom : series->ooms) {
        trace.Oom(pid, oom, oom.tag_id != 0 ? NameOr(tags, oom.tag_id, "tag") : "",
                  oom.source_id != 0 ? NameOr(sources, oom.source_id, "source") : "");
      }
    }
    if (series != nullptr && !series->live.empty()) {
      for (const SeriesPoint& p : series->live) {
        trace.Counter(pid, kLiveBytesTrack, p.ts_ns, {{"bytes", p.bytes}});
      }
    } else {
      for (const v1::StepRollup& step : rank.steps()) {
        trace.Counter(pid, kLiveBytesTrack, step.start_ns(), {{"bytes", step.start_bytes()}});
        if (step.end_ns() > step.start_ns()) {
          trace.Counter(pid, kLiveBytesTrack, step.end_ns(), {{"bytes", step.end_bytes()}});
        }
      }
    }
    for (const v1::StepRollup& step : rank.steps()) {
      trace.Counter(pid, kStepFloorPeakTrack, step.start_ns(),
                    {{"floor", step.floor_bytes()}, {"peak", step.peak_bytes()}});
    }
    if (series != nullptr && !series->device_used.empty()) {
      for (const SeriesPoint& p : series->device_used) {
        trace.Counter(pid, kDeviceUsedTrack, p.ts_ns, {{"bytes", p.bytes}});
      }
    } else {
      for (const v1::StepRollup& step : rank.steps()) {
        if (step.device_used_max() == 0) continue;
        trace.Counter(pid, kDeviceUsedTrack, step.start_ns(), {{"bytes", step.device_used_max()}});
      }
    }
    if (!top_tags.empty()) {
      absl::flat_hash_map<uint32_t, std::string> names = TagNames(rank);
      absl::flat_hash_map<std::string, uint32_t> ids;
      for (const auto& [id, name] : names) ids[name] = id;
      for (const std::string& tag : top_tags) {
        auto id = ids.find(tag);
        if (id == ids.end()) continue;  // this rank never used the tag
        std::string track = absl::StrCat(kTagTrackPrefix, tag);
        for (const v1::StepRollup& step : rank.steps()) {
          uint64_t live = 0;
          for (const v1::GroupBytes& g : step.by_tag()) {
            if (g.id() == id->second) live = g.live_bytes();
          }
          int64_t at = step.end_ns() > step.start_ns() ? step.end_ns() : step.start_ns();
          trace.Counter(pid, track, at, {{"bytes", live}});
        }
      }
    }
  }
  w.EndArray();
  w.EndObject();
  out.flush();
  if (!out.good()) return absl::InternalError("writing the trace failed");
  return absl::OkStatus();
}

}  // namespace memtrace::exporter
