#include "query/analysis/render.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "query/analysis/units.h"
#include "query/cli/text_escape.h"

namespace memtrace::analysis {
namespace {

// Columns padded to their widest cell, two spaces apart; numeric columns right-aligned.
class TextTable {
 public:
  // A header starting with '>' is right-aligned (the '>' is not printed).
  explicit TextTable(std::vector<std::string> headers) {
    for (std::string& h : headers) {
      bool right = !h.empty() && h[0] == '>';
      right_.push_back(right);
      header_.push_back(right ? h.substr(1) : h);
    }
  }
  void Add(std::vector<std::string> row) {
    row.resize(header_.size());
    rows_.push_back(std::move(row));
  }
  bool empty() const { return rows_.empty(); }
  std::string Render(const std::string& indent = "") const {
    std::vector<size_t> width(header_.size());
    for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
    for (const auto& row : rows_) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
      std::string l = indent;
      for (size_t c = 0; c < cells.size(); ++c) {
        size_t pad = width[c] - cells[c].size();
        bool last = c + 1 == cells.size();
        if (right_[c]) l.append(pad, ' ');
        l += cells[c];
        if (!right_[c] && !last) l.append(pad, ' ');
        if (!last) l += "  ";
      }
      while (!l.empty() && l.back() == ' ') l.pop_back();
      out += l + "\n";
    };
    line(header_);
    for (const auto& row : rows_) line(row);
    return out;
  }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string Time(int64_t ns) {
  if (ns == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

// To the millisecond: the moment a live set is read at (three reads within one second of an RL
// step, in three phases, all printed "02:00:20").
std::string TimeMs(int64_t ns) {
  if (ns == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

// "steps 5..99", or "time buckets 2026-12-03 21:07:59..2026-12-03 21:09:14".
std::string Window(int64_t first, int64_t last, int64_t bucket_ns) {
  return absl::StrCat(bucket_ns > 0 ? "time buckets " : "steps ", FormatKeyValue(first, bucket_ns),
                      "..", FormatKeyValue(last, bucket_ns));
}

std::string Z(double z) {
  if (std::isinf(z)) return z > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.1f", z);
}

std::string Bytes(uint64_t b) { return FormatBytes(static_cast<double>(b)); }
std::string Signed(int64_t b) { return FormatSignedBytes(static_cast<double>(b)); }
// Names come from the job (ids, NVTX tags, hosts): a control character in one is escaped, not
// printed (a newline would start a line of its own).
std::string OrDash(const std::string& s) { return s.empty() ? "-" : cli::TerminalText(s); }
std::string Printable(const std::string& s) { return cli::TerminalText(s); }

// "rank 3", "ranks 0-7": a count, "(3 without a known capacity)", read as a rank.
std::string NameRanks(const std::vector<uint32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", FormatRankList(ranks));
}

}  // namespace

namespace {

std::string RenderDivergenceWithoutAttempts(const v1::DivergenceReport& r) {
  std::string out = absl::StrCat("job ", Printable(r.job_id()), ": ", Printable(r.message()), "\n");
  if (r.status() == v1::DIVERGENCE_STATUS_TOO_FEW_RANKS ||
      r.status() == v1::DIVERGENCE_STATUS_TOO_FEW_STEPS) {
    return out;
  }
  const v1::DivergenceParams& p = r.params();
  const int64_t bucket_ns = r.bucket_ns();
  // A collector older than ranks_compared counted every selected rank as compared.
  const uint32_t compared = r.has_ranks_compared() ? r.ranks_compared() : r.ranks();
  absl::StrAppend(
      &out, "compared ", compared,
      compared < r.ranks() ? absl::StrCat(" of ", r.ranks(), " ranks over ") : " ranks over ",
      bucket_ns > 0 ? "time buckets " : "steps ", FormatKeyValue(r.first_step(), bucket_ns), "..",
      FormatKeyValue(r.last_step(), bucket_ns), " (", r.steps_compared(),
      bucket_ns > 0 ? " buckets; bucket " : " steps; step ",
      p.metric() == v1::ANALYSIS_METRIC_END    ? "end"
      : p.metric() == v1::ANALYSIS_METRIC_PEAK ? "peak"
                                               : "floor",
      p.absolute() ? ", absolute" : ", change since baseline", "; persistence ",
      p.persistence_steps(), bucket_ns > 0 ? " buckets)\n" : " steps)\n");
  if (r.diverged_size() > 0) {
    TextTable t({">#", ">rank", "host", ">onset", ">drift from", "time", ">value", ">cohort",
                 ">excess", ">z", ">now", ">now excess"});
    int i = 0;
    for (const v1::RankDivergence& d : r.diverged()) {
      t.Add({absl::StrCat(++i), absl::StrCat(d.rank()), OrDash(d.host()),
             FormatKeyValue(d.onset_step(), bucket_ns),
             FormatKeyValue(d.departure_step(), bucket_ns),
             // Buckets of less than whole seconds: the onset's ms, which its key column shows.
             bucket_ns % 1'000'000'000 != 0 ? TimeMs(d.onset_ns()) : Time(d.onset_ns()),
             Bytes(d.value_bytes()), Bytes(d.cohort_median_bytes()), Signed(d.excess_bytes()),
             Z(d.robust_z()), Bytes(d.last_value_bytes()), Signed(d.last_excess_bytes())});
    }
    out += "\n" + t.Render();
  }
  if (r.offsets_size() > 0) {
    out += "\nranks that always held a different amount (offsets, not divergences):\n";
    TextTable t({">rank", ">baseline", ">cohort", ">offset"});
    for (const v1::RankOffset& o : r.offsets()) {
      t.Add({absl::StrCat(o.rank()), Bytes(o.baseline_bytes()), Bytes(o.cohort_baseline_bytes()),
             Signed(o.offset_bytes())});
    }
    out += t.Render();
  }
  return out;
}

}  // namespace

// "; 1 of 4 ranks too short to fit" when some ranks had fewer than min_points steps in the
// window after their warm-up: none of their series was fitted, grow as they might.
std::string TooShort(const v1::GrowthReport& r) {
  if (!r.has_ranks_fitted() || r.ranks_fitted() >= r.ranks()) return "";
  return absl::StrCat("; ", r.ranks() - r.ranks_fitted(), " of ", r.ranks(),
                      " ranks too short to fit");
}

namespace {

std::string RenderGrowthWithoutAttempts(const v1::GrowthReport& r) {
  static const char* const kBy[] = {"tag", "rank", "tag,rank", "source", "source,rank"};
  std::string by = r.by() >= 0 && r.by() < 5 ? kBy[r.by()] : "tag";
  std::string out = absl::StrCat("job ", Printable(r.job_id()), ": ");
  if (r.groups_size() == 0 && r.groups_examined() == 0) {
    // No window to show ("steps 0..0"): the warm-up or the window left too few points.
    absl::StrAppend(&out, "nothing to fit (by ", by, "): no series has ", r.params().min_points(),
                    " points",
                    r.params().window_steps() > 0
                        ? absl::StrCat(" in the last ", r.params().window_steps(), " (--window)")
                        : "",
                    " after each rank's first ", r.params().warmup_steps(), " steps (--warmup)\n");
    return out;
  }
  if (r.groups_size() == 0) {
    absl::StrAppend(&out, "nothing grows (by ", by, ", ",
                    Window(r.first_step(), r.last_step(), r.bucket_ns()), ", ", r.groups_examined(),
                    " series examined; growth counts from ", Bytes(r.params().min_growth_bytes()),
                    " over the window at trend z >= ",
                    absl::StrFormat("%.1f", r.params().min_trend_z()), TooShort(r), ")\n");
    return out;
  }
  absl::StrAppend(&out, r.groups_size(), r.groups_size() == 1 ? " group grows" : " groups grow",
                  " (by ", by, ", ", Window(r.first_step(), r.last_step(), r.bucket_ns()), ", ",
                  r.groups_examined(), " series examined", TooShort(r), ")\n\n");
  bool per_rank = r.by() == v1::GROWTH_BY_RANK || r.by() == v1::GROWTH_BY_TAG_RANK ||
                  r.by() == v1::GROWTH_BY_SOURCE_RANK;
  std::string name_header =
      r.by() == v1::GROWTH_BY_SOURCE || r.by() == v1::GROWTH_BY_SOURCE_RANK ? "source" : "tag";
  std::vector<std::string> headers;
  if (r.by() != v1::GROWTH_BY_RANK) headers.push_back(name_header);
  if (per_rank) headers.push_back(">rank");
  // Summed over the growing ranks, so said: "+94 GiB" beside a tag growing on 8 ranks read as
  // each rank's growth. A per-rank grouping's row is one rank, its sum that rank's.
  const bool summed = !per_rank;
  for (const char* h : {summed ? ">rate, summed" : ">rate", ">per rank", "scope", "growing on",
                        summed ? ">growth, summed" : ">growth"}) {
    headers.push_back(h);
  }
  TextTable t(headers);
  for (const v1::GroupGrowth& g : r.groups()) {
    std::vector<uint32_t> ranks;
    double growth = 0;
    for (const v1::RankGrowth& rg : g.ranks()) {
      ranks.push_back(rg.rank());
      growth += rg.growth_bytes();
    }
    // "All" is all the ranks fitted: "all 4 ranks" beside "growing on 0-2" left the fourth,
    // too short to fit, unexplained. A collector without ranks_fitted made a group's scope all
    // when it grew on every fitted rank: ranks_growing is their number.
    const uint32_t fitted = r.has_ranks_fitted() ? r.ranks_fitted() : g.ranks_growing();
    std::string scope = g.scope() != v1::GROWTH_SCOPE_ALL_RANKS
                            ? absl::StrCat(g.ranks_growing(), " of ", r.ranks(), " ranks")
                        : fitted >= r.ranks()
                            ? absl::StrCat("all ", r.ranks(), " ranks")
                            : absl::StrCat("all ", fitted, " of ", r.ranks(), " ranks (",
                                           r.ranks() - fitted, " too short to fit)");
    std::vector<std::string> row;
    if (r.by() != v1::GROWTH_BY_RANK) row.push_back(OrDash(g.name()));
    if (per_rank) row.push_back(absl::StrCat(g.rank()));
    row.push_back(FormatRate(g.total_bytes_per_step(), r.bucket_ns()));
    row.push_back(FormatRate(g.median_bytes_per_step(), r.bucket_ns()));
    row.push_back(scope);
    row.push_back(per_rank && r.by() != v1::GROWTH_BY_RANK
                      ? absl::StrCat(name_header, " on ", g.ranks_growing())
                      : FormatRankList(ranks));
    row.push_back(FormatSignedBytes(growth));
    t.Add(row);
  }
  out += t.Render();
  return out;
}

// A table's rows by rank: those that differ only in their rank are added as one row whose rank
// cell lists their ranks ("0-2,4-7"), where the first of them stood. 1024 ranks that each keep
// the optimizer state their first update made are one row, not 1024, and a rank unlike the
// others stands out. Cells compare as shown (bytes to three digits).
class RowsByRank {
 public:
  // The ranks go to cell `rank_column` of each row. Cell `step_column` of the rest (-1: none)
  // is a step that may differ within a row of several ranks: it shows the steps' range ("1-6"),
  // as the step at which each reached the same peak.
  explicit RowsByRank(size_t rank_column = 0, int step_column = -1)
      : rank_column_(rank_column), step_column_(step_column) {}

  // `step`: the value of the step cell, which `rest` need not hold.
  void Add(uint32_t rank, std::vector<std::string> rest, int64_t step = 0) {
    if (step_column_ >= 0) rest[step_column_].clear();
    auto [it, added] = index_.try_emplace(rest, groups_.size());
    if (added) groups_.push_back({{}, std::move(rest), step, step});
    Group& g = groups_[it->second];
    g.ranks.push_back(rank);
    g.first_step = std::min(g.first_step, step);
    g.last_step = std::max(g.last_step, step);
  }
  void AddTo(TextTable& table) const {
    for (const Group& g : groups_) {
      std::vector<std::string> row = g.rest;
      if (step_column_ >= 0) {
        row[step_column_] = g.first_step == g.last_step
                                ? absl::StrCat(g.first_step)
                                : absl::StrCat(g.first_step, "-", g.last_step);
      }
      row.insert(row.begin() + rank_column_, FormatRankCell(g.ranks));
      table.Add(std::move(row));
    }
  }

  // The ranks of a row, a list too long for a column cut short with their count: "27 ranks:
  // 0-2,8,12,14,16-17,...". Values that differ by a digit split 1024 ranks into rows of
  // hundreds of scattered ranks each; `--format json` lists every one.
  static std::string FormatRankCell(std::vector<uint32_t> ranks) {
    constexpr size_t kMaxWidth = 40;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string list = FormatRankList(ranks);
    if (list.size() <= kMaxWidth) return list;
    const std::string head = absl::StrCat(ranks.size(), " ranks: ");
    const size_t room = kMaxWidth > head.size() + 4 ? kMaxWidth - head.size() - 4 : 0;
    // Whole items ("0-2", "8"), not a rank cut in two: "1" of "17" would name another rank.
    size_t cut = list.rfind(',', room);
    if (cut == std::string::npos) cut = 0;
    return absl::StrCat(head, list.substr(0, cut), cut > 0 ? ",..." : "...");
  }

 private:
  struct Group {
    std::vector<uint32_t> ranks;
    std::vector<std::string> rest;
    int64_t first_step;
    int64_t last_step;
  };
  size_t rank_column_;
  int step_column_;
  std::vector<Group> groups_;
  std::map<std::vector<std::string>, size_t> index_;
};

}  // namespace

// One row per rank (ranks alike share one, see RowsByRank): its curve and the evidence for it.
std::string RenderCurves(const v1::LeakReport& r) {
  static const char* const kCurve[] = {"plateau", "spikes", "leak", "too short"};
  RowsByRank rows;
  std::vector<uint32_t> early;  // leaking since the first step examined
  for (const v1::RankCurve& c : r.curves()) {
    const v1::CurveEvidence& e = c.evidence();
    std::string spikes = "-";
    if (e.spike_steps() > 0) {
      spikes = absl::StrCat(e.spike_steps(), " (max ", Signed(e.max_spike_excess_bytes()), " at ",
                            FormatKey(e.max_spike_step(), r.bucket_ns()),
                            e.spike_period_steps() > 0
                                ? absl::StrCat(", every ~", e.spike_period_steps(),
                                               r.bucket_ns() > 0 ? " bucket" : " step",
                                               e.spike_period_steps() == 1 ? "" : "s")
                                : "",
                            ")");
    }
    int curve = c.curve() >= 0 && c.curve() < 4 ? c.curve() : 0;
    // A rank with no point after warm-up has no floor or peak to show: "-", not "0 B".
    const bool measured = e.points() > 0;
    const auto bytes = [&](uint64_t b) { return measured ? Bytes(b) : std::string("-"); };
    const auto rate = [&](double b) {
      return measured ? FormatRate(b, r.bucket_ns()) : std::string("-");
    };
    if (c.curve() == v1::CURVE_CLASS_LEAK && e.rising_from_first_examined() &&
        r.params().warmup_steps() > 0) {
      early.push_back(c.rank());
    }
    rows.Add(
        c.rank(),
        {kCurve[curve], OrDash(c.allocator()), bytes(e.floor_start_bytes()),
         bytes(e.floor_end_bytes()), rate(e.floor_bytes_per_step()),
         rate(e.recent_bytes_per_step()),
         e.rising_since_step() >= 0 ? FormatKeyValue(e.rising_since_step(), r.bucket_ns()) : "-",
         bytes(e.median_peak_bytes()), spikes});
  }
  TextTable t({">rank", "curve", "allocator", ">floor start", ">floor end", ">floor slope",
               ">recent slope", ">rising since", ">typical peak", "spikes"});
  rows.AddTo(t);
  std::string out = t.Render();
  // Of the steps after warm-up, where `memtrace peak` reads every step by default: rank 3's
  // typical peak read 40.0 GiB here and 36.2 GiB there, with nothing to say why.
  if (r.params().warmup_steps() > 0 &&
      std::any_of(r.curves().begin(), r.curves().end(),
                  [](const v1::RankCurve& c) { return c.evidence().points() > 0; })) {
    const char* unit = r.bucket_ns() > 0 ? "bucket" : "step";
    absl::StrAppend(&out, "(floors and typical peaks of the ", unit, "s after each rank's first ",
                    r.params().warmup_steps(), ", --warmup; memtrace peak reads every ", unit,
                    " unless given --warmup ", r.params().warmup_steps(), ")\n");
  }
  // A leak begun in warm-up (step 0 or 1) rises from the first step examined: read as its start,
  // it dated the leak steps late.
  if (!early.empty()) {
    absl::StrAppend(&out, NameRanks(early), ": rising from the first ",
                    r.bucket_ns() > 0 ? "bucket" : "step", " examined after warm-up (--warmup ",
                    r.params().warmup_steps(), "): it may have begun earlier\n");
  }
  return out;
}

// Live allocations made after warm-up that outlived min_boundaries steps.
std::string RenderLeakCandidates(const v1::LeakReport& r) {
  if (r.candidates_size() == 0) return "";
  std::string out = absl::StrCat("\nleak candidates (allocated after warm-up, live across >= ",
                                 r.params().min_boundaries(), " step boundaries):\n");
  // Of a restarted job, which attempt's live set each row comes from (--at before a restart
  // reads the attempt that held the moment, not the curves' latest).
  const bool attempts = std::any_of(r.candidates().begin(), r.candidates().end(),
                                    [](const v1::LeakCandidate& l) { return l.attempt() > 0; });
  std::vector<std::string> header = {">rank",  "tag",     "source",  ">allocations", ">bytes",
                                     ">steps", ">oldest", ">newest", ">at step"};
  if (attempts) header.insert(header.begin() + 1, ">attempt");
  RowsByRank rows;
  for (const v1::LeakCandidate& l : r.candidates()) {
    std::vector<std::string> row = {OrDash(l.tag()),
                                    OrDash(l.source()),
                                    absl::StrCat(l.count()),
                                    Bytes(l.bytes()),
                                    absl::StrCat(l.distinct_steps()),
                                    absl::StrCat(l.oldest_step()),
                                    absl::StrCat(l.newest_step()),
                                    absl::StrCat(l.at_step())};
    if (attempts) row.insert(row.begin(), absl::StrCat(l.attempt()));
    rows.Add(l.rank(), std::move(row));
  }
  TextTable c(header);
  rows.AddTo(c);
  out += c.Render();
  return out;
}

// From live sets: memory a phase allocated, live after that phase ended.
std::string RenderPhaseSurvivors(const v1::LeakReport& r) {
  if (r.phase_survivors_size() == 0) return "";
  std::string out = "\nmemory still live after its phase ended:\n";
  // Without step markers every step is 0: the step columns would say nothing, but the runs of
  // the phase that left memory (told apart by time) still do.
  const bool steps = !r.no_step_markers();
  const bool attempts = std::any_of(r.phase_survivors().begin(), r.phase_survivors().end(),
                                    [](const v1::PhaseSurvivor& p) { return p.attempt() > 0; });
  std::vector<std::string> header = {">rank", "phase", "tag", "source", ">allocations", ">bytes"};
  if (attempts) header.insert(header.begin() + 1, ">attempt");
  if (steps) {
    header.insert(header.end(), {">steps", ">since step", ">at step"});
  } else {
    header.push_back(">runs");
  }
  header.push_back("open now");
  RowsByRank rows;
  for (const v1::PhaseSurvivor& p : r.phase_survivors()) {
    std::vector<std::string> row = {OrDash(p.phase()), OrDash(p.tag()), OrDash(p.source()),
                                    absl::StrCat(p.count()), Bytes(p.bytes())};
    if (attempts) row.insert(row.begin(), absl::StrCat(p.attempt()));
    if (steps) {
      row.insert(row.end(), {absl::StrCat(p.distinct_steps()), absl::StrCat(p.oldest_step()),
                             absl::StrCat(p.at_step())});
    } else {
      row.push_back(absl::StrCat(p.distinct_steps()));
    }
    row.push_back(p.open_phases_size() > 0 ? Printable(absl::StrJoin(p.open_phases(), ",")) : "-");
    rows.Add(p.rank(), std::move(row));
  }
  TextTable s(header);
  rows.AddTo(s);
  out += s.Render();
  return out;
}

// From rollups: phase-named tags still holding memory at the ends of its steps.
std::string RenderPhaseResidues(const v1::LeakReport& r) {
  if (r.phase_residues_size() == 0) return "";
  const bool buckets = r.bucket_ns() > 0;
  std::string out = absl::StrCat("\nphase-tagged memory live at ", buckets ? "time bucket" : "step",
                                 " ends (from rollups):\n");
  RowsByRank rows;
  for (const v1::PhaseResidue& p : r.phase_residues()) {
    rows.Add(p.rank(), {OrDash(p.phase()), absl::StrCat(p.residue_steps(), " of ", p.phase_steps()),
                        Bytes(p.median_residue_bytes()), Bytes(p.last_residue_bytes()),
                        Bytes(p.max_residue_bytes())});
  }
  TextTable s({">rank", "phase", buckets ? ">buckets" : ">steps", ">median", ">last", ">max"});
  rows.AddTo(s);
  out += s.Render();
  return out;
}

// What the curves say of the ranks classified, naming those too short to classify: "no rank
// leaks" counted ranks never looked at (with --rank, every rank but one).
std::string LeakVerdict(const v1::LeakReport& r) {
  static const char* const kCurve[] = {"a plateau", "spikes", "a leak", "too short to classify"};
  if (r.has_only_rank()) {
    for (const v1::RankCurve& c : r.curves()) {
      if (c.rank() != r.only_rank()) continue;
      const int curve = c.curve() >= 0 && c.curve() < 4 ? c.curve() : 0;
      return absl::StrCat("rank ", c.rank(),
                          c.curve() == v1::CURVE_CLASS_LEAK ? " leaks"
                          : c.curve() == v1::CURVE_CLASS_TOO_SHORT
                              ? " is too short to classify"
                              : absl::StrCat(" does not leak (", kCurve[curve], ")"),
                          " (only rank ", r.only_rank(), " examined: --rank)");
    }
    return absl::StrCat("rank ", r.only_rank(), " has no steps to classify (--rank)");
  }
  std::vector<uint32_t> too_short;
  for (const v1::RankCurve& c : r.curves()) {
    if (c.curve() == v1::CURVE_CLASS_TOO_SHORT) too_short.push_back(c.rank());
  }
  const uint32_t classified = static_cast<uint32_t>(r.curves_size() - too_short.size());
  std::string verdict =
      r.leaking_ranks() == 0
          ? (too_short.empty() ? std::string("no rank leaks")
             // "no rank of the 0 classified leaks" said of a job none of whose ranks was.
             : classified == 0 ? std::string("no rank classified")
                               : absl::StrCat("no rank of the ", classified, " classified leaks"))
          // "1 of 8 ranks leaks": the noun counts the ranks, the verb the leaking ones.
          : absl::StrCat(
                r.leaking_ranks(), " of ", classified, too_short.empty() ? "" : " classified",
                classified == 1 ? " rank" : " ranks", r.leaking_ranks() == 1 ? " leaks" : " leak");
  if (!too_short.empty()) {
    absl::StrAppend(&verdict, "; ", NameRanks(too_short), " too short to classify");
  }
  return verdict;
}

namespace {

std::string RenderLeaksWithoutAttempts(const v1::LeakReport& r) {
  std::string out = absl::StrCat(
      "job ", Printable(r.job_id()), ": ", LeakVerdict(r),
      // As diverged and growth say it; candidates need steps to count warm-up and boundaries.
      r.no_step_markers() ? absl::StrCat(" (no step markers: compared ", r.bucket_ns() / 1'000'000,
                                         " ms time buckets; no leak candidates)")
                          : "",
      "\n\n");
  absl::StrAppend(&out, RenderCurves(r), RenderLeakCandidates(r), RenderPhaseSurvivors(r),
                  RenderPhaseResidues(r));
  return out;
}

}  // namespace

std::string RenderLive(const v1::LiveReport& r) {
  // Without step markers every step is 0: the moment is its time alone.
  const bool steps = !r.no_step_markers();
  // A rank's subprocess is named by its process; a step asked of one without steps of its own
  // is its rank's (rank_step).
  const std::string subject =
      r.has_subprocess_of_rank() ? absl::StrCat("pid ", r.subprocess_pid(), ", ",
                                                FormatSubprocessOf(r.subprocess_of_rank(),
                                                                   r.subprocess_started_the_rank()),
                                                " (memtrace ranks: ", r.rank(), "),")
                                 : absl::StrCat("rank ", r.rank());
  std::string out = absl::StrCat(
      "job ", Printable(r.job_id()), ": ", subject,
      r.attempt() > 0 || r.oom_before_restart() || r.latest_attempt() > r.attempt()
          ? absl::StrCat(" attempt ", r.attempt(),
                         r.latest_attempt() > r.attempt() && !r.oom_before_restart()
                             ? absl::StrCat(" (of ", r.latest_attempt() + 1, ")")
                             : "")
          : "",
      " at ",
      // Its peak: the moment it was reached, which every rank was read at.
      r.at_peak() ? absl::StrCat("its peak of ", Bytes(r.peak_bytes()), ", reached at ",
                                 TimeMs(r.asked_ns()),
                                 steps ? absl::StrCat(" (step ", r.at_step(), ")") : std::string())
      // A time asked: that time, which every rank was read at (the header showed the rank's
      // last event before it, while the other ranks' median included what came after).
      : r.asked_ns() != 0
          ? absl::StrCat(TimeMs(r.asked_ns()), " (",
                         steps ? absl::StrCat("step ", r.at_step(), "; ") : std::string(),
                         "its last event before it at ", TimeMs(r.at_ns()), ")")
      : r.has_rank_step()
          ? absl::StrCat("the end of rank ", r.subprocess_of_rank(), "'s step ", r.rank_step(),
                         " (its last event by then at ", TimeMs(r.at_ns()), ")")
      : steps ? absl::StrCat("step ", r.at_step(), " (", TimeMs(r.at_ns()),
                             r.at_step_cut_short()
                                 ? "; cut short: the rank's stream ended within the step"
                                 : "",
                             ")")
              : TimeMs(r.at_ns()));
  if (r.has_oom()) {
    absl::StrAppend(&out, ", its OOM: a ", Bytes(r.oom().requested_bytes()), " allocation failed");
    std::vector<std::string> what;
    if (!r.oom().tag().empty()) what.push_back(absl::StrCat("tag ", Printable(r.oom().tag())));
    if (!r.oom().source().empty()) {
      what.push_back(absl::StrCat("from ", Printable(r.oom().source())));
    }
    if (!what.empty()) absl::StrAppend(&out, " (", absl::StrJoin(what, ", "), ")");
    if (r.oom_before_restart()) absl::StrAppend(&out, " (a restart followed it)");
  }
  absl::StrAppend(&out, "\n", Bytes(r.total_bytes()), " live in ", r.total_count(), " allocations");
  if (r.open_phases_size() > 0) {
    absl::StrAppend(&out, ", in ", Printable(absl::StrJoin(r.open_phases(), "/")));
  }
  if (r.other_ranks() > 0) {
    absl::StrAppend(&out, "; the other ", r.other_ranks(), " ranks' median ",
                    Bytes(r.others_median_total_bytes()));
    if (r.others_ended_before() > 0) {
      absl::StrAppend(&out, " (", r.others_ended_before(),
                      " of them had ended before this moment: read at their last event, what "
                      "they held then)");
    }
  }
  if (r.has_subprocess_of_rank()) {
    absl::StrAppend(&out, " (compared with no rank: `memtrace live --rank ", r.subprocess_of_rank(),
                    "` shows it beside its rank)");
  }
  if (r.others_without_the_step() > 0) {
    absl::StrAppend(&out, r.other_ranks() > 0 ? "; " : "; no other rank compared: ",
                    r.others_without_the_step(), " other rank",
                    r.others_without_the_step() == 1 ? " has" : "s have", " no step ", r.at_step());
  }
  if (r.others_not_begun() > 0) {
    absl::StrAppend(&out,
                    r.other_ranks() > 0 ? "; " : "; no other rank compared: ", r.others_not_begun(),
                    " other rank", r.others_not_begun() == 1 ? " had" : "s had",
                    " not begun by then (no event at or before it)");
  }
  absl::StrAppend(&out, "\n");
  // Its subprocesses' memory, on the same device and in none of the figures above.
  for (const v1::SubprocessLive& sub : r.subprocesses()) {
    absl::StrAppend(&out,
                    sub.started_the_rank() ? "and the process that started it, pid "
                                           : "and its subprocess pid ",
                    sub.pid(), " (memtrace ranks: ", sub.rank(), "): ");
    if (!sub.unread().empty()) {
      absl::StrAppend(&out, "not read: ", Printable(sub.unread()), "\n");
      continue;
    }
    absl::StrAppend(
        &out, Bytes(sub.live_bytes()), " live in ", sub.allocation_count(), " allocations",
        // Its memory as of its last event: idle since, or exited (and freed, which
        // no event records).
        sub.at_ns() < r.at_ns() ? absl::StrCat(", as of its last event at ", TimeMs(sub.at_ns()),
                                               " (idle since, or exited)")
                                : "",
        "\n");
  }
  absl::StrAppend(&out, "\n");
  bool tag = r.params().by() != v1::LIVE_GROUP_BY_SOURCE;
  bool source = r.params().by() != v1::LIVE_GROUP_BY_TAG;
  std::vector<std::string> headers;
  if (tag) headers.push_back("tag");
  if (source) headers.push_back("source");
  for (const char* h : {">bytes", ">allocations"}) headers.push_back(h);
  if (steps) headers.push_back(">since step");
  if (r.other_ranks() > 0) {
    for (const char* h : {">others median", ">others max", ">excess"}) headers.push_back(h);
  }
  TextTable t(headers);
  for (const v1::LiveGroup& g : r.groups()) {
    std::vector<std::string> row;
    if (tag) row.push_back(OrDash(g.tag()));
    if (source) row.push_back(OrDash(g.source()));
    row.push_back(Bytes(g.bytes()));
    row.push_back(absl::StrCat(g.count()));
    if (steps) row.push_back(absl::StrCat(g.oldest_step()));
    if (r.other_ranks() > 0) {
      row.push_back(Bytes(g.others_median_bytes()));
      // No other rank holds the group: none is its maximum ("0 B (rank 0)" named one).
      row.push_back(g.others_max_bytes() > 0 ? absl::StrCat(Bytes(g.others_max_bytes()), " (rank ",
                                                            g.others_max_rank(), ")")
                                             : Bytes(0));
      row.push_back(Signed(g.excess_bytes()));
    }
    t.Add(row);
  }
  out += t.Render();
  if (r.groups_total() > static_cast<uint32_t>(r.groups_size())) {
    absl::StrAppend(&out, "(top ", r.groups_size(), " of ", r.groups_total(), " groups)\n");
  }
  return out;
}

namespace {

std::string RenderPeakWithoutAttempts(const v1::PeakReport& r) {
  static const char* const kBy[] = {"phase", "tag", "source", "rank"};
  std::string by = r.by() >= 0 && r.by() < 4 ? kBy[r.by()] : "phase";
  std::string out = absl::StrCat("job ", Printable(r.job_id()), ": peak by ", by, " over ",
                                 r.ranks(), " ranks\n");
  if (r.summaries_size() == 0) {
    // The warm-up may have left out every step the job has: then nothing "was recorded" is
    // not what happened.
    const uint32_t warmup = r.params().warmup_steps();
    absl::StrAppend(
        &out, "no ", by, " recorded",
        warmup > 0 ? absl::StrCat(" after each rank's first ", warmup, " steps (--warmup)") : "",
        r.by() == v1::PEAK_BY_PHASE && warmup == 0 ? " (no NVTX phase range in the job's steps)\n"
                                                   : "\n");
    return out;
  }
  out += "\n";
  // By rank the group is the rank itself: no column of its own (it would show "-").
  const bool by_rank = r.by() == v1::PEAK_BY_RANK;
  const int64_t bucket_ns = r.bucket_ns();
  const std::string when = bucket_ns > 0 ? "bucket" : "step";
  std::vector<std::string> summary_header = {">max peak",    ">rank",        ">" + when,
                                             ">median rank", ">lowest rank", ">ranks"};
  if (!by_rank) summary_header.insert(summary_header.begin(), by);
  TextTable s(summary_header);
  for (const v1::PeakSummary& p : r.summaries()) {
    std::vector<std::string> row = {Bytes(p.max_peak_bytes()),
                                    absl::StrCat(p.max_rank()),
                                    FormatKeyValue(p.max_step(), bucket_ns),
                                    Bytes(p.median_rank_peak_bytes()),
                                    Bytes(p.min_rank_peak_bytes()),
                                    absl::StrCat(p.ranks())};
    if (!by_rank) row.insert(row.begin(), OrDash(p.group()));
    s.Add(row);
  }
  out += s.Render();
  out += "\n";
  std::vector<std::string> entry_header = {
      ">rank", ">peak", ">at " + when, ">typical peak",
      // Medians, as "typical peak" is: a rank's last
      // step end read 39 GiB where this said 26.9.
      by == "phase" ? ">typical at close" : ">typical at " + when + " end", ">" + when + "s"};
  // A rank's peak moment, where its rows keep one: what `live --at-peak` reads.
  const bool moments = std::any_of(r.entries().begin(), r.entries().end(),
                                   [](const v1::PeakEntry& p) { return p.peak_at_moment(); });
  if (moments) entry_header.insert(entry_header.begin() + 3, ">reached at");
  if (!by_rank) entry_header.insert(entry_header.begin(), by);
  // Ranks whose rows are alike share one, where each reached the same peak at its own step (the
  // step's range); not time buckets, whose range would read as one time. By rank, each row's
  // moment ("reached at") is its own: those rows stay apart.
  const size_t rank_column = by_rank ? 0 : 1;
  // The step's cell, in a row without its rank cell (inserted by RowsByRank).
  const int step_column =
      static_cast<int>(std::find(entry_header.begin(), entry_header.end(), ">at " + when) -
                       entry_header.begin()) -
      1;
  RowsByRank rows(rank_column, bucket_ns > 0 ? -1 : step_column);
  for (const v1::PeakEntry& p : r.entries()) {
    std::vector<std::string> row = {Bytes(p.peak_bytes()), FormatKeyValue(p.peak_step(), bucket_ns),
                                    p.steps() > 0 ? Bytes(p.median_peak_bytes()) : "-",
                                    p.open_at_end() < p.steps() ? Bytes(p.median_end_bytes()) : "-",
                                    absl::StrCat(p.steps())};
    if (moments) row.insert(row.begin() + 2, p.peak_at_moment() ? TimeMs(p.peak_ns()) : "-");
    if (!by_rank) row.insert(row.begin(), OrDash(p.group()));
    rows.Add(p.rank(), std::move(row), p.peak_step());
  }
  TextTable e(entry_header);
  rows.AddTo(e);
  out += e.Render();
  if (std::any_of(r.entries().begin(), r.entries().end(),
                  [](const v1::PeakEntry& p) { return p.steps() == 0; })) {
    absl::StrAppend(&out, "(0 ", when, "s: seen only in the ", when,
                    " in progress or cut short, its peak so far; no typical one yet)\n");
  }
  return out;
}

}  // namespace

namespace {

std::string RenderHeadroomWithoutAttempts(const v1::HeadroomReport& r) {
  std::string out = absl::StrCat("job ", Printable(r.job_id()), ": ");
  uint32_t ooms = 0;
  uint32_t full = 0;
  std::vector<uint32_t> too_short, no_capacity;
  for (const v1::RankHeadroom& h : r.entries()) {
    if (h.status() == v1::HEADROOM_STATUS_OUT_OF_MEMORY) ++ooms;
    if (h.status() == v1::HEADROOM_STATUS_AT_CAPACITY) ++full;
    if (h.status() == v1::HEADROOM_STATUS_TOO_SHORT) too_short.push_back(h.rank());
    if (h.status() == v1::HEADROOM_STATUS_NO_CAPACITY) no_capacity.push_back(h.rank());
  }
  // "No rank is on course" read as all clear on a job none of whose ranks could be forecast.
  std::vector<std::string> unread;
  if (!too_short.empty()) {
    unread.push_back(absl::StrCat(NameRanks(too_short), " too short to forecast (fewer than ",
                                  r.params().min_points(), " steps after --warmup ",
                                  r.params().warmup_steps(), ")"));
  }
  if (!no_capacity.empty()) {
    unread.push_back(absl::StrCat(NameRanks(no_capacity), " without a known capacity"));
  }
  const size_t forecastable =
      static_cast<size_t>(r.entries_size()) - too_short.size() - no_capacity.size();
  if (r.forecasts() == 0 && ooms == 0 && full == 0 && forecastable == 0 && !unread.empty()) {
    absl::StrAppend(&out, "no rank could be forecast: ", absl::StrJoin(unread, "; "), "\n");
  } else if (r.forecasts() == 0 && ooms == 0 && full == 0) {
    absl::StrAppend(&out, "no rank is on course to fill its device",
                    unread.empty() ? "" : absl::StrCat(" (", absl::StrJoin(unread, "; "), ")"),
                    "\n");
  } else {
    absl::StrAppend(&out, r.forecasts(), " of ", r.ranks(), " ranks on course to fill their device",
                    ooms > 0 ? absl::StrCat(", ", ooms, " already out of memory") : "",
                    full > 0 ? absl::StrCat(", ", full, " already at the capacity") : "", "\n");
  }
  // A line for each of the first few ranks (soonest first); of 1024 ranks at or past a capacity
  // asked for, the headline was 1024 lines above the table that lists them merged.
  constexpr int kHeadlineRanks = 8;
  int headlines = 0, more = 0;
  for (const v1::RankHeadroom& h : r.entries()) {
    const bool headline = h.status() == v1::HEADROOM_STATUS_FORECAST ||
                          h.status() == v1::HEADROOM_STATUS_OUT_OF_MEMORY ||
                          h.status() == v1::HEADROOM_STATUS_AT_CAPACITY;
    if (headline && headlines == kHeadlineRanks) {
      ++more;
      continue;
    }
    headlines += headline;
    if (h.status() == v1::HEADROOM_STATUS_FORECAST) {
      // The peak reaches what traced allocations can have: the capacity less what the device
      // holds outside them (the CUDA context, ...), which "reaches 80.0 GiB" left out.
      const uint64_t usable =
          h.capacity_bytes() > h.overhead_bytes() ? h.capacity_bytes() - h.overhead_bytes() : 0;
      absl::StrAppend(&out, "  rank ", h.rank(), " reaches ", Bytes(h.capacity_bytes()),
                      h.overhead_bytes() > 0 ? absl::StrCat(" (", Bytes(usable), " traced + ",
                                                            Bytes(h.overhead_bytes()), " outside)")
                                             : "",
                      " at ", FormatKey(h.forecast_step(), r.bucket_ns(), /*approximate=*/true),
                      " (", FormatDuration(static_cast<double>(h.eta_ns())),
                      h.last_start_ns() != 0
                          ? absl::StrCat(" after ", TimeMs(h.last_start_ns()), ", when its last ",
                                         r.bucket_ns() > 0 ? "bucket" : "step", " began")
                          : " from its last step",
                      ", at ", FormatRate(h.floor_bytes_per_step(), r.bucket_ns()), ")\n");
    } else if (h.status() == v1::HEADROOM_STATUS_OUT_OF_MEMORY) {
      absl::StrAppend(&out, "  rank ", h.rank(), " ran out of memory at ",
                      FormatKey(h.forecast_step(), r.bucket_ns()), "\n");
    } else if (h.status() == v1::HEADROOM_STATUS_AT_CAPACITY) {
      absl::StrAppend(&out, "  rank ", h.rank(), " already peaks at ", Bytes(h.last_peak_bytes()),
                      ", at or past the capacity (", Bytes(h.capacity_bytes()), ", ",
                      Bytes(h.overhead_bytes()), " of it used outside traced allocations)\n");
    }
  }
  if (more > 0) {
    absl::StrAppend(&out, "  and ", more, " more rank", more == 1 ? "" : "s",
                    " (the table below lists each)\n");
  }
  out += "\n";
  static const char* const kStatus[] = {"flat",        "forecast",  "out of memory",
                                        "no capacity", "too short", "at capacity"};
  RowsByRank rows;  // 1024 flat ranks alike are one row
  for (const v1::RankHeadroom& h : r.entries()) {
    int s = h.status() >= 0 && h.status() < 6 ? h.status() : 0;
    bool forecast = h.status() == v1::HEADROOM_STATUS_FORECAST;
    // A rank too short to fit has no slope: "0 B/step" read as measured flat (leaks shows "-");
    // nor has one out of memory or at capacity within its first few steps.
    const bool fitted =
        h.has_trend_fitted() ? h.trend_fitted() : h.status() != v1::HEADROOM_STATUS_TOO_SHORT;
    rows.Add(h.rank(),
             {kStatus[s], h.capacity_bytes() > 0 ? Bytes(h.capacity_bytes()) : "-",
              Bytes(h.overhead_bytes()), Bytes(h.last_peak_bytes()),
              // Of no capacity, no headroom either: "0 B" read as none left.
              h.capacity_bytes() > 0 ? Bytes(h.headroom_bytes()) : "-",
              fitted ? FormatRate(h.floor_bytes_per_step(), r.bucket_ns()) : "-",
              h.forecast_step() >= 0 ? FormatKeyValue(h.forecast_step(), r.bucket_ns()) : "-",
              forecast ? FormatDuration(static_cast<double>(h.eta_ns())) : "-"});
  }
  TextTable t({">rank", "status", ">capacity", ">outside", ">last peak", ">headroom",
               ">floor slope", r.bucket_ns() > 0 ? ">full at" : ">full at step",
               r.bucket_ns() > 0 ? ">after last bucket" : ">after last step"});
  rows.AddTo(t);
  out += t.Render();
  return out;
}

}  // namespace

namespace {
std::string AttemptsLine(const v1::AttemptsNote& n, bool subprocesses = false);  // below
}  // namespace

std::string RenderCompare(const v1::CompareReport& r) {
  int changed = 0;
  for (const v1::CompareItem& it : r.items()) changed += it.changed();
  // Job ids, and tag and phase names in the subjects and values, come from the jobs.
  // What each job is: comparing 8 ranks x 60 steps with 4 x 25 said nothing of it.
  const auto shape = [&r](const v1::JobAnalyses& j) {
    const bool by_time = j.diverged().bucket_ns() > 0;
    return absl::StrCat(j.ranks(), j.ranks() == 1 ? " rank" : " ranks", ", ", j.steps(),
                        by_time ? " time buckets" : (j.steps() == 1 ? " step" : " steps"));
  };
  std::string out = absl::StrCat("compare ", Printable(r.job_a()), " (A: ", shape(r.a()), ") with ",
                                 Printable(r.job_b()), " (B: ", shape(r.b()), "): ", changed,
                                 changed == 1 ? " difference" : " differences", "\n");
  // A restarted job's column is of the attempts its note names.
  for (const auto& [side, job] : {std::pair{"A", &r.a()}, std::pair{"B", &r.b()}}) {
    std::string line = AttemptsLine(job->attempts());
    if (!line.empty()) out += absl::StrCat("note, ", side, ": ", line.substr(6));
  }
  out += "\n";
  TextTable t(
      {"analysis", "subject", "A: " + Printable(r.job_a()), "B: " + Printable(r.job_b()), ""});
  for (const v1::CompareItem& it : r.items()) {
    t.Add({Printable(it.analysis()), Printable(it.subject()), Printable(it.a()), Printable(it.b()),
           it.changed() ? "changed" : ""});
  }
  out += t.Render();
  return out;
}

namespace {

// A line under a report's first for a job whose ranks restarted: which attempts it read, and the
// OOMs of those it did not ("no rank diverged" of a rerun said nothing of the run that ran out
// of memory).
// `subprocesses`: of a report of the ranks' subprocesses, each read at its rank's attempt (the
// attempts counted are theirs, not the job's).
std::string AttemptsLine(const v1::AttemptsNote& n, bool subprocesses) {
  if (n.attempts() < 2) return "";
  std::string out;
  if (subprocesses) {
    out = absl::StrCat("note: read the subprocesses of ",
                       n.has_asked()   ? absl::StrCat("attempt ", n.asked(), " (--attempt)")
                       : n.at_moment() ? std::string("each rank's attempt running at that moment")
                                       : std::string("each rank's latest attempt that started any"),
                       " (theirs are of ", n.attempts(), " attempts)");
  } else {
    out = n.has_asked() ? absl::StrCat("note: read attempt ", n.asked(), " of the job's ",
                                       n.attempts(), " (--attempt)")
          : n.at_moment()
              ? absl::StrCat("note: read each rank's attempt running at that moment (the job has ",
                             n.attempts(), ")")
              : absl::StrCat("note: read each rank's latest attempt (the job has ", n.attempts(),
                             ")");
  }
  if (n.unread_ooms_size() > 0) {
    std::vector<std::string> ooms;
    for (const v1::UnreadOom& o : n.unread_ooms()) {
      ooms.push_back(absl::StrCat(
          o.has_subprocess_of_rank()
              ? absl::StrCat("subprocess ", o.rank(), " (of rank ", o.subprocess_of_rank(), ")")
              : absl::StrCat("rank ", o.rank()),
          " attempt ", o.attempt(), " at ", TimeMs(o.first_oom_ns())));
    }
    std::set<uint32_t> attempts;
    for (const v1::UnreadOom& o : n.unread_ooms()) attempts.insert(o.attempt());
    absl::StrAppend(&out, "; not read, ", n.unread_ooms_size() == 1 ? "an OOM of " : "OOMs of ",
                    absl::StrJoin(ooms, ", "), " (--attempt ", absl::StrJoin(attempts, " or "),
                    n.unread_ooms_size() == 1 ? " reads it)" : " reads them)");
  }
  return out + "\n";
}

// `text` with `line` under its first line.
std::string UnderFirstLine(std::string text, const std::string& line) {
  if (line.empty()) return text;
  const size_t first = text.find('\n');
  text.insert(first == std::string::npos ? text.size() : first + 1, line);
  return text;
}

// `text` with AttemptsLine under its first line.
std::string WithAttempts(std::string text, const v1::AttemptsNote& n, bool subprocesses) {
  return UnderFirstLine(std::move(text), AttemptsLine(n, subprocesses));
}

// A report of the ranks' subprocesses (its request's `subprocesses`) says so: its "ranks" are
// the subprocesses' numbers, which read as launcher ranks otherwise. `what`: what it did with
// them.
std::string WithSubprocessesNote(
    std::string text, bool subprocesses,
    absl::string_view what = "compared: the ranks' subprocesses with each other") {
  if (!subprocesses) return text;
  return UnderFirstLine(std::move(text),
                        absl::StrCat("(", what,
                                     "; each \"rank\" here is a subprocess's number in memtrace "
                                     "ranks, which names its rank and pid)\n"));
}

}  // namespace

std::string RenderDivergence(const v1::DivergenceReport& r) {
  return WithSubprocessesNote(
      WithAttempts(RenderDivergenceWithoutAttempts(r), r.attempts(), r.subprocesses()),
      r.subprocesses());
}

std::string RenderGrowth(const v1::GrowthReport& r) {
  return WithSubprocessesNote(
      WithAttempts(RenderGrowthWithoutAttempts(r), r.attempts(), r.subprocesses()),
      r.subprocesses());
}

std::string RenderLeaks(const v1::LeakReport& r) {
  return WithSubprocessesNote(
      WithAttempts(RenderLeaksWithoutAttempts(r), r.attempts(), r.subprocesses()),
      r.subprocesses());
}

std::string RenderPeak(const v1::PeakReport& r) {
  return WithSubprocessesNote(
      WithAttempts(RenderPeakWithoutAttempts(r), r.attempts(), r.subprocesses()), r.subprocesses());
}

std::string RenderHeadroom(const v1::HeadroomReport& r) {
  return WithSubprocessesNote(
      WithAttempts(RenderHeadroomWithoutAttempts(r), r.attempts(), r.subprocesses()),
      r.subprocesses(),
      "forecast: the ranks' subprocesses, each against the device it "
      "shares with its rank");
}

}  // namespace memtrace::analysis
