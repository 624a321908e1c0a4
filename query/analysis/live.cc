#include "query/analysis/live.h"

#include <algorithm>
#include <map>
#include <utility>

#include "query/analysis/robust_stats.h"

namespace memtrace::analysis {
namespace {

using Key = std::pair<std::string, std::string>;

Key KeyOf(const LiveAllocation& a, LiveGroupBy by) {
  switch (by) {
    case LiveGroupBy::kTag:
      return {a.tag, ""};
    case LiveGroupBy::kSource:
      return {"", a.source};
    case LiveGroupBy::kTagSource:
      return {a.tag, a.source};
  }
  return {a.tag, ""};
}

std::map<Key, uint64_t> BytesBy(const RankLiveSet& set, LiveGroupBy by) {
  std::map<Key, uint64_t> out;
  for (const LiveAllocation& a : set.allocations) out[KeyOf(a, by)] += a.bytes;
  return out;
}

uint64_t Total(const RankLiveSet& set) {
  uint64_t sum = 0;
  for (const LiveAllocation& a : set.allocations) sum += a.bytes;
  return sum;
}

}  // namespace

std::optional<OomMoment> FindOom(const RankTimeline& rank) {
  const StepPoint* p = rank.FirstOomRow();
  if (p == nullptr) return std::nullopt;
  return OomMoment{p->step, p->end_ns, p->oom_requested_bytes};
}

LiveReport DescribeLive(absl::string_view job_id, const RankLiveSet& rank,
                        absl::Span<const RankLiveSet> others, const LiveParams& params,
                        std::optional<OomMoment> oom) {
  LiveReport report;
  report.job_id = std::string(job_id);
  report.rank = rank.rank;
  report.at_step = rank.at_step;
  report.at_ns = rank.at_ns;
  report.oom = oom;
  report.open_phases = rank.open_phases;
  report.params = params;

  std::map<Key, LiveGroup> groups;
  for (const LiveAllocation& a : rank.allocations) {
    Key key = KeyOf(a, params.by);
    auto [it, inserted] = groups.try_emplace(key);
    LiveGroup& g = it->second;
    if (inserted) {
      g.tag = key.first;
      g.source = key.second;
      g.oldest_step = g.newest_step = a.step_allocated;
    }
    g.bytes += a.bytes;
    ++g.count;
    g.oldest_step = std::min(g.oldest_step, a.step_allocated);
    g.newest_step = std::max(g.newest_step, a.step_allocated);
    report.total_bytes += a.bytes;
    ++report.total_count;
  }

  std::vector<const RankLiveSet*> peers;
  for (const RankLiveSet& o : others) {
    if (o.rank != rank.rank) peers.push_back(&o);
  }
  std::sort(peers.begin(), peers.end(),
            [](const RankLiveSet* a, const RankLiveSet* b) { return a->rank < b->rank; });
  report.other_ranks = static_cast<uint32_t>(peers.size());
  std::vector<std::map<Key, uint64_t>> peer_bytes;
  std::vector<double> totals;
  for (const RankLiveSet* p : peers) {
    peer_bytes.push_back(BytesBy(*p, params.by));
    totals.push_back(static_cast<double>(Total(*p)));
  }
  if (!totals.empty()) report.others_median_total_bytes = static_cast<uint64_t>(Median(totals));

  std::vector<double> values;
  for (auto& [key, g] : groups) {
    values.clear();
    for (size_t i = 0; i < peers.size(); ++i) {
      auto it = peer_bytes[i].find(key);
      uint64_t b = it == peer_bytes[i].end() ? 0 : it->second;
      values.push_back(static_cast<double>(b));
      if (b > g.others_max_bytes || i == 0) {
        g.others_max_bytes = b;
        g.others_max_rank = peers[i]->rank;
      }
      if (g.others.size() < params.max_other_ranks) g.others.push_back({peers[i]->rank, b});
    }
    if (!values.empty()) g.others_median_bytes = static_cast<uint64_t>(Median(values));
    g.excess_bytes = static_cast<int64_t>(g.bytes) - static_cast<int64_t>(g.others_median_bytes);
  }

  report.groups_total = static_cast<uint32_t>(groups.size());
  for (auto& [key, g] : groups) report.groups.push_back(std::move(g));
  auto by_bytes = [](const LiveGroup& a, const LiveGroup& b) { return a.bytes > b.bytes; };
  auto by_excess = [](const LiveGroup& a, const LiveGroup& b) {
    return a.excess_bytes != b.excess_bytes ? a.excess_bytes > b.excess_bytes : a.bytes > b.bytes;
  };
  if (params.order == LiveOrder::kExcess && !peers.empty()) {
    std::stable_sort(report.groups.begin(), report.groups.end(), by_excess);
  } else {
    std::stable_sort(report.groups.begin(), report.groups.end(), by_bytes);
  }
  if (report.groups.size() > params.top_n) report.groups.resize(params.top_n);
  return report;
}

}  // namespace memtrace::analysis
