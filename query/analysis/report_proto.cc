#include "query/analysis/report_proto.h"

namespace memtrace::analysis {
namespace {

Metric FromWire(v1::AnalysisMetric m) {
  switch (m) {
    case v1::ANALYSIS_METRIC_END:
      return Metric::kEnd;
    case v1::ANALYSIS_METRIC_PEAK:
      return Metric::kPeak;
    default:
      return Metric::kFloor;
  }
}

v1::AnalysisMetric ToWire(Metric m) {
  switch (m) {
    case Metric::kEnd:
      return v1::ANALYSIS_METRIC_END;
    case Metric::kPeak:
      return v1::ANALYSIS_METRIC_PEAK;
    case Metric::kFloor:
      return v1::ANALYSIS_METRIC_FLOOR;
  }
  return v1::ANALYSIS_METRIC_FLOOR;
}

GrowthBy FromWire(v1::GrowthBy by) {
  switch (by) {
    case v1::GROWTH_BY_RANK:
      return GrowthBy::kRank;
    case v1::GROWTH_BY_TAG_RANK:
      return GrowthBy::kTagRank;
    case v1::GROWTH_BY_SOURCE:
      return GrowthBy::kSource;
    case v1::GROWTH_BY_SOURCE_RANK:
      return GrowthBy::kSourceRank;
    default:
      return GrowthBy::kTag;
  }
}

v1::GrowthBy ToWire(GrowthBy by) {
  switch (by) {
    case GrowthBy::kRank:
      return v1::GROWTH_BY_RANK;
    case GrowthBy::kTagRank:
      return v1::GROWTH_BY_TAG_RANK;
    case GrowthBy::kSource:
      return v1::GROWTH_BY_SOURCE;
    case GrowthBy::kSourceRank:
      return v1::GROWTH_BY_SOURCE_RANK;
    case GrowthBy::kTag:
      return v1::GROWTH_BY_TAG;
  }
  return v1::GROWTH_BY_TAG;
}

PeakBy FromWire(v1::PeakBy by) {
  switch (by) {
    case v1::PEAK_BY_TAG:
      return PeakBy::kTag;
    case v1::PEAK_BY_SOURCE:
      return PeakBy::kSource;
    case v1::PEAK_BY_RANK:
      return PeakBy::kRank;
    default:
      return PeakBy::kPhase;
  }
}

v1::PeakBy ToWire(PeakBy by) {
  switch (by) {
    case PeakBy::kTag:
      return v1::PEAK_BY_TAG;
    case PeakBy::kSource:
      return v1::PEAK_BY_SOURCE;
    case PeakBy::kRank:
      return v1::PEAK_BY_RANK;
    case PeakBy::kPhase:
      return v1::PEAK_BY_PHASE;
  }
  return v1::PEAK_BY_PHASE;
}

LiveGroupBy FromWire(v1::LiveGroupBy by) {
  switch (by) {
    case v1::LIVE_GROUP_BY_SOURCE:
      return LiveGroupBy::kSource;
    case v1::LIVE_GROUP_BY_TAG_SOURCE:
      return LiveGroupBy::kTagSource;
    default:
      return LiveGroupBy::kTag;
  }
}

v1::LiveGroupBy ToWire(LiveGroupBy by) {
  switch (by) {
    case LiveGroupBy::kSource:
      return v1::LIVE_GROUP_BY_SOURCE;
    case LiveGroupBy::kTagSource:
      return v1::LIVE_GROUP_BY_TAG_SOURCE;
    case LiveGroupBy::kTag:
      return v1::LIVE_GROUP_BY_TAG;
  }
  return v1::LIVE_GROUP_BY_TAG;
}

v1::DivergenceStatus ToWire(DivergenceStatus s) {
  switch (s) {
    case DivergenceStatus::kDiverged:
      return v1::DIVERGENCE_STATUS_DIVERGED;
    case DivergenceStatus::kTooFewRanks:
      return v1::DIVERGENCE_STATUS_TOO_FEW_RANKS;
    case DivergenceStatus::kTooFewSteps:
      return v1::DIVERGENCE_STATUS_TOO_FEW_STEPS;
    case DivergenceStatus::kNoneDiverged:
      return v1::DIVERGENCE_STATUS_NONE_DIVERGED;
  }
  return v1::DIVERGENCE_STATUS_NONE_DIVERGED;
}

v1::CurveClass ToWire(CurveClass c) {
  switch (c) {
    case CurveClass::kSpikes:
      return v1::CURVE_CLASS_SPIKES;
    case CurveClass::kLeak:
      return v1::CURVE_CLASS_LEAK;
    case CurveClass::kTooShort:
      return v1::CURVE_CLASS_TOO_SHORT;
    case CurveClass::kPlateau:
      return v1::CURVE_CLASS_PLATEAU;
  }
  return v1::CURVE_CLASS_PLATEAU;
}

v1::HeadroomStatus ToWire(HeadroomStatus s) {
  switch (s) {
    case HeadroomStatus::kForecast:
      return v1::HEADROOM_STATUS_FORECAST;
    case HeadroomStatus::kOutOfMemory:
      return v1::HEADROOM_STATUS_OUT_OF_MEMORY;
    case HeadroomStatus::kNoCapacity:
      return v1::HEADROOM_STATUS_NO_CAPACITY;
    case HeadroomStatus::kTooShort:
      return v1::HEADROOM_STATUS_TOO_SHORT;
    case HeadroomStatus::kAtCapacity:
      return v1::HEADROOM_STATUS_AT_CAPACITY;
    case HeadroomStatus::kFlat:
      return v1::HEADROOM_STATUS_FLAT;
  }
  return v1::HEADROOM_STATUS_FLAT;
}

// Copies an optional wire field into a plain one when set.
#define MT_COPY_IF(wire, field, plain) \
  if ((wire).has_##field()) (plain) = (wire).field()

}  // namespace

DivergenceParams FromProto(const v1::DivergenceParams& p) {
  DivergenceParams out;
  if (p.has_metric()) out.metric = FromWire(p.metric());
  MT_COPY_IF(p, persistence_steps, out.persistence_steps);
  MT_COPY_IF(p, min_z, out.min_z);
  MT_COPY_IF(p, min_excess_bytes, out.min_excess_bytes);
  MT_COPY_IF(p, min_excess_fraction, out.min_excess_fraction);
  MT_COPY_IF(p, warmup_steps, out.warmup_steps);
  MT_COPY_IF(p, baseline_steps, out.baseline_steps);
  if (p.has_absolute()) out.relative_to_baseline = !p.absolute();
  if (p.has_attempt()) out.attempt = p.attempt();
  return out;
}

GrowthParams FromProto(const v1::GrowthParams& p) {
  GrowthParams out;
  if (p.has_by()) out.by = FromWire(p.by());
  if (p.has_rank_metric()) out.rank_metric = FromWire(p.rank_metric());
  MT_COPY_IF(p, warmup_steps, out.warmup_steps);
  MT_COPY_IF(p, window_steps, out.window_steps);
  MT_COPY_IF(p, min_growth_bytes, out.min_growth_bytes);
  MT_COPY_IF(p, min_trend_z, out.min_trend_z);
  MT_COPY_IF(p, min_points, out.min_points);
  MT_COPY_IF(p, max_pairs, out.max_pairs);
  if (p.has_attempt()) out.attempt = p.attempt();
  return out;
}

LeakParams FromProto(const v1::LeakParams& p) {
  LeakParams out;
  MT_COPY_IF(p, warmup_steps, out.warmup_steps);
  MT_COPY_IF(p, min_growth_bytes, out.min_growth_bytes);
  MT_COPY_IF(p, min_trend_z, out.min_trend_z);
  MT_COPY_IF(p, min_points, out.min_points);
  MT_COPY_IF(p, min_spike_bytes, out.min_spike_bytes);
  MT_COPY_IF(p, spike_mad_factor, out.spike_mad_factor);
  MT_COPY_IF(p, max_spike_fraction, out.max_spike_fraction);
  MT_COPY_IF(p, min_boundaries, out.min_boundaries);
  MT_COPY_IF(p, top_n, out.top_n);
  MT_COPY_IF(p, min_phase_bytes, out.min_phase_bytes);
  MT_COPY_IF(p, min_residue_steps, out.min_residue_steps);
  MT_COPY_IF(p, max_pairs, out.max_pairs);
  if (p.has_attempt()) out.attempt = p.attempt();
  return out;
}

LiveParams FromProto(const v1::LiveParams& p) {
  LiveParams out;
  if (p.has_by()) out.by = FromWire(p.by());
  if (p.has_order()) {
    out.order = p.order() == v1::LIVE_ORDER_EXCESS ? LiveOrder::kExcess : LiveOrder::kBytes;
  }
  MT_COPY_IF(p, top_n, out.top_n);
  MT_COPY_IF(p, max_other_ranks, out.max_other_ranks);
  return out;
}

PeakParams FromProto(const v1::PeakParams& p) {
  PeakParams out;
  if (p.has_by()) out.by = FromWire(p.by());
  MT_COPY_IF(p, warmup_steps, out.warmup_steps);
  if (p.has_attempt()) out.attempt = p.attempt();
  return out;
}

HeadroomParams FromProto(const v1::HeadroomParams& p) {
  HeadroomParams out;
  if (p.has_capacity_bytes()) out.capacity_bytes = p.capacity_bytes();
  MT_COPY_IF(p, recent_steps, out.recent_steps);
  MT_COPY_IF(p, warmup_steps, out.warmup_steps);
  MT_COPY_IF(p, min_growth_bytes, out.min_growth_bytes);
  MT_COPY_IF(p, min_trend_z, out.min_trend_z);
  MT_COPY_IF(p, min_points, out.min_points);
  MT_COPY_IF(p, max_horizon_steps, out.max_horizon_steps);
  MT_COPY_IF(p, max_pairs, out.max_pairs);
  if (p.has_attempt()) out.attempt = p.attempt();
  return out;
}

CompareParams FromProto(const v1::CompareParams& p) {
  CompareParams out;
  out.diverged = FromProto(p.diverged());
  out.growth = FromProto(p.growth());
  out.leaks = FromProto(p.leaks());
  out.peak = FromProto(p.peak());
  out.headroom = FromProto(p.headroom());
  MT_COPY_IF(p, min_change_fraction, out.min_change_fraction);
  return out;
}

#undef MT_COPY_IF

void ToProto(const DivergenceParams& p, v1::DivergenceParams* out) {
  out->Clear();
  out->set_metric(ToWire(p.metric));
  out->set_persistence_steps(p.persistence_steps);
  out->set_min_z(p.min_z);
  out->set_min_excess_bytes(p.min_excess_bytes);
  out->set_min_excess_fraction(p.min_excess_fraction);
  out->set_warmup_steps(p.warmup_steps);
  out->set_baseline_steps(p.baseline_steps);
  out->set_absolute(!p.relative_to_baseline);
  if (p.attempt.has_value()) out->set_attempt(*p.attempt);
}

void ToProto(const GrowthParams& p, v1::GrowthParams* out) {
  out->Clear();
  out->set_by(ToWire(p.by));
  out->set_rank_metric(ToWire(p.rank_metric));
  out->set_warmup_steps(p.warmup_steps);
  out->set_window_steps(p.window_steps);
  out->set_min_growth_bytes(p.min_growth_bytes);
  out->set_min_trend_z(p.min_trend_z);
  out->set_min_points(p.min_points);
  out->set_max_pairs(p.max_pairs);
  if (p.attempt.has_value()) out->set_attempt(*p.attempt);
}

void ToProto(const LeakParams& p, v1::LeakParams* out) {
  out->Clear();
  out->set_warmup_steps(p.warmup_steps);
  out->set_min_growth_bytes(p.min_growth_bytes);
  out->set_min_trend_z(p.min_trend_z);
  out->set_min_points(p.min_points);
  out->set_min_spike_bytes(p.min_spike_bytes);
  out->set_spike_mad_factor(p.spike_mad_factor);
  out->set_max_spike_fraction(p.max_spike_fraction);
  out->set_min_boundaries(p.min_boundaries);
  out->set_top_n(p.top_n);
  out->set_min_phase_bytes(p.min_phase_bytes);
  out->set_min_residue_steps(p.min_residue_steps);
  out->set_max_pairs(p.max_pairs);
  if (p.attempt.has_value()) out->set_attempt(*p.attempt);
}

void ToProto(const LiveParams& p, v1::LiveParams* out) {
  out->Clear();
  out->set_by(ToWire(p.by));
  out->set_order(p.order == LiveOrder::kExcess ? v1::LIVE_ORDER_EXCESS : v1::LIVE_ORDER_BYTES);
  out->set_top_n(p.top_n);
  out->set_max_other_ranks(p.max_other_ranks);
}

void ToProto(const PeakParams& p, v1::PeakParams* out) {
  out->Clear();
  out->set_by(ToWire(p.by));
  out->set_warmup_steps(p.warmup_steps);
  if (p.attempt.has_value()) out->set_attempt(*p.attempt);
}

void ToProto(const HeadroomParams& p, v1::HeadroomParams* out) {
  out->Clear();
  if (p.capacity_bytes.has_value()) out->set_capacity_bytes(*p.capacity_bytes);
  out->set_recent_steps(p.recent_steps);
  out->set_warmup_steps(p.warmup_steps);
  out->set_min_growth_bytes(p.min_growth_bytes);
  out->set_min_trend_z(p.min_trend_z);
  out->set_min_points(p.min_points);
  out->set_max_horizon_steps(p.max_horizon_steps);
  out->set_max_pairs(p.max_pairs);
  if (p.attempt.has_value()) out->set_attempt(*p.attempt);
}

void ToProto(const DivergenceReport& r, v1::DivergenceReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_status(ToWire(r.status));
  out->set_message(r.message);
  out->set_ranks(r.ranks);
  out->set_first_step(r.first_step);
  out->set_last_step(r.last_step);
  out->set_steps_compared(r.steps_compared);
  out->set_bucket_ns(r.bucket_ns);
  out->set_ranks_compared(r.ranks_compared);
  for (uint32_t rank : r.ranks_not_compared) out->add_ranks_not_compared(rank);
  for (const RankDivergence& d : r.diverged) {
    v1::RankDivergence* w = out->add_diverged();
    w->set_rank(d.rank);
    w->set_attempt(d.attempt);
    w->set_host(d.host);
    w->set_onset_step(d.onset_step);
    w->set_onset_ns(d.onset_ns);
    w->set_departure_step(d.departure_step);
    w->set_value_bytes(d.value_bytes);
    w->set_cohort_median_bytes(d.cohort_median_bytes);
    w->set_excess_bytes(d.excess_bytes);
    w->set_robust_z(d.robust_z);
    w->set_direction(d.direction);
    w->set_run_steps(d.run_steps);
    w->set_last_step(d.last_step);
    w->set_last_value_bytes(d.last_value_bytes);
    w->set_last_cohort_median_bytes(d.last_cohort_median_bytes);
    w->set_last_excess_bytes(d.last_excess_bytes);
  }
  for (const RankOffset& o : r.offsets) {
    v1::RankOffset* w = out->add_offsets();
    w->set_rank(o.rank);
    w->set_baseline_bytes(o.baseline_bytes);
    w->set_cohort_baseline_bytes(o.cohort_baseline_bytes);
    w->set_offset_bytes(o.offset_bytes);
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const GrowthReport& r, v1::GrowthReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_by(ToWire(r.by));
  out->set_ranks(r.ranks);
  out->set_first_step(r.first_step);
  out->set_last_step(r.last_step);
  out->set_bucket_ns(r.bucket_ns);
  out->set_groups_examined(r.groups_examined);
  out->set_ranks_fitted(r.ranks_fitted);
  for (const GroupGrowth& g : r.groups) {
    v1::GroupGrowth* w = out->add_groups();
    w->set_name(g.name);
    if (g.rank.has_value()) w->set_rank(*g.rank);
    w->set_scope(g.scope == GrowthScope::kAllRanks ? v1::GROWTH_SCOPE_ALL_RANKS
                                                   : v1::GROWTH_SCOPE_SOME_RANKS);
    w->set_ranks_growing(g.ranks_growing);
    w->set_ranks_with_group(g.ranks_with_group);
    w->set_total_bytes_per_step(g.total_bytes_per_step);
    w->set_median_bytes_per_step(g.median_bytes_per_step);
    for (const RankGrowth& rg : g.ranks) {
      v1::RankGrowth* x = w->add_ranks();
      x->set_rank(rg.rank);
      x->set_bytes_per_step(rg.bytes_per_step);
      x->set_growth_bytes(rg.growth_bytes);
      x->set_first_bytes(rg.first_bytes);
      x->set_last_bytes(rg.last_bytes);
      x->set_trend_z(rg.trend_z);
      x->set_first_step(rg.first_step);
      x->set_last_step(rg.last_step);
    }
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const LeakReport& r, v1::LeakReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_ranks(r.ranks);
  out->set_leaking_ranks(r.leaking_ranks);
  out->set_bucket_ns(r.bucket_ns);
  if (r.params.rank.has_value()) out->set_only_rank(*r.params.rank);
  for (const RankCurve& c : r.curves) {
    v1::RankCurve* w = out->add_curves();
    w->set_rank(c.rank);
    w->set_curve(ToWire(c.curve));
    w->set_allocator(c.allocator);
    const CurveEvidence& e = c.evidence;
    v1::CurveEvidence* x = w->mutable_evidence();
    x->set_first_step(e.first_step);
    x->set_last_step(e.last_step);
    x->set_points(e.points);
    x->set_floor_start_bytes(e.floor_start_bytes);
    x->set_floor_end_bytes(e.floor_end_bytes);
    x->set_floor_bytes_per_step(e.floor_bytes_per_step);
    x->set_floor_growth_bytes(e.floor_growth_bytes);
    x->set_floor_trend_z(e.floor_trend_z);
    x->set_recent_bytes_per_step(e.recent_bytes_per_step);
    x->set_recent_trend_z(e.recent_trend_z);
    x->set_rising_since_step(e.rising_since_step);
    x->set_rising_from_first_examined(e.rising_from_first_examined);
    x->set_median_peak_bytes(e.median_peak_bytes);
    x->set_spike_steps(e.spike_steps);
    x->set_max_spike_excess_bytes(e.max_spike_excess_bytes);
    x->set_max_spike_step(e.max_spike_step);
    x->set_spike_period_steps(e.spike_period_steps);
    for (int64_t s : e.first_spikes) x->add_first_spikes(s);
  }
  for (const LeakCandidate& c : r.candidates) {
    v1::LeakCandidate* w = out->add_candidates();
    w->set_rank(c.rank);
    w->set_tag(c.tag);
    w->set_source(c.source);
    w->set_count(c.count);
    w->set_bytes(c.bytes);
    w->set_oldest_step(c.oldest_step);
    w->set_newest_step(c.newest_step);
    w->set_distinct_steps(c.distinct_steps);
    w->set_at_step(c.at_step);
    w->set_attempt(c.attempt);
  }
  for (const PhaseSurvivor& s : r.phase_survivors) {
    v1::PhaseSurvivor* w = out->add_phase_survivors();
    w->set_rank(s.rank);
    w->set_phase(s.phase);
    w->set_tag(s.tag);
    w->set_source(s.source);
    w->set_count(s.count);
    w->set_bytes(s.bytes);
    w->set_oldest_step(s.oldest_step);
    w->set_at_step(s.at_step);
    for (const std::string& p : s.open_phases) w->add_open_phases(p);
    w->set_distinct_steps(s.distinct_steps);
    w->set_attempt(s.attempt);
  }
  for (const PhaseResidue& p : r.phase_residues) {
    v1::PhaseResidue* w = out->add_phase_residues();
    w->set_rank(p.rank);
    w->set_phase(p.phase);
    w->set_phase_steps(p.phase_steps);
    w->set_residue_steps(p.residue_steps);
    w->set_median_residue_bytes(p.median_residue_bytes);
    w->set_last_residue_bytes(p.last_residue_bytes);
    w->set_max_residue_bytes(p.max_residue_bytes);
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const LiveReport& r, v1::LiveReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_rank(r.rank);
  out->set_at_step(r.at_step);
  out->set_at_ns(r.at_ns);
  if (r.oom.has_value()) {
    out->mutable_oom()->set_step(r.oom->step);
    out->mutable_oom()->set_ts_ns(r.oom->ts_ns);
    out->mutable_oom()->set_requested_bytes(r.oom->requested_bytes);
    out->mutable_oom()->set_tag(r.oom->tag);
    out->mutable_oom()->set_source(r.oom->source);
  }
  for (const std::string& p : r.open_phases) out->add_open_phases(p);
  out->set_total_bytes(r.total_bytes);
  out->set_total_count(r.total_count);
  out->set_other_ranks(r.other_ranks);
  out->set_others_median_total_bytes(r.others_median_total_bytes);
  out->set_groups_total(r.groups_total);
  for (const LiveGroup& g : r.groups) {
    v1::LiveGroup* w = out->add_groups();
    w->set_tag(g.tag);
    w->set_source(g.source);
    w->set_bytes(g.bytes);
    w->set_count(g.count);
    w->set_oldest_step(g.oldest_step);
    w->set_newest_step(g.newest_step);
    w->set_others_median_bytes(g.others_median_bytes);
    w->set_others_max_bytes(g.others_max_bytes);
    w->set_others_max_rank(g.others_max_rank);
    w->set_excess_bytes(g.excess_bytes);
    for (const RankBytes& o : g.others) {
      v1::RankBytes* x = w->add_others();
      x->set_rank(o.rank);
      x->set_bytes(o.bytes);
    }
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const PeakReport& r, v1::PeakReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_by(ToWire(r.by));
  out->set_ranks(r.ranks);
  out->set_bucket_ns(r.bucket_ns);
  for (const PeakSummary& s : r.summaries) {
    v1::PeakSummary* w = out->add_summaries();
    w->set_group(s.group);
    w->set_max_peak_bytes(s.max_peak_bytes);
    w->set_max_rank(s.max_rank);
    w->set_max_step(s.max_step);
    w->set_median_rank_peak_bytes(s.median_rank_peak_bytes);
    w->set_min_rank_peak_bytes(s.min_rank_peak_bytes);
    w->set_ranks(s.ranks);
  }
  for (const PeakEntry& e : r.entries) {
    v1::PeakEntry* w = out->add_entries();
    w->set_group(e.group);
    w->set_rank(e.rank);
    w->set_peak_bytes(e.peak_bytes);
    w->set_peak_step(e.peak_step);
    w->set_peak_ns(e.peak_ns);
    w->set_peak_at_moment(e.at_moment);
    w->set_median_peak_bytes(e.median_peak_bytes);
    w->set_median_end_bytes(e.median_end_bytes);
    w->set_open_at_end(e.open_at_end);
    w->set_steps(e.steps);
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const HeadroomReport& r, v1::HeadroomReport* out) {
  out->Clear();
  out->set_job_id(r.job_id);
  out->set_ranks(r.ranks);
  out->set_forecasts(r.forecasts);
  out->set_bucket_ns(r.bucket_ns);
  for (const RankHeadroom& h : r.entries) {
    v1::RankHeadroom* w = out->add_entries();
    w->set_rank(h.rank);
    w->set_status(ToWire(h.status));
    w->set_capacity_bytes(h.capacity_bytes);
    w->set_capacity_from_samples(h.capacity_from_samples);
    w->set_overhead_bytes(h.overhead_bytes);
    w->set_last_step(h.last_step);
    w->set_last_floor_bytes(h.last_floor_bytes);
    w->set_last_peak_bytes(h.last_peak_bytes);
    w->set_transient_bytes(h.transient_bytes);
    w->set_headroom_bytes(h.headroom_bytes);
    w->set_floor_bytes_per_step(h.floor_bytes_per_step);
    w->set_trend_z(h.trend_z);
    w->set_trend_fitted(h.trend_fitted);
    w->set_forecast_step(h.forecast_step);
    w->set_floor_forecast_step(h.floor_forecast_step);
    w->set_step_ns(h.step_ns);
    w->set_eta_ns(h.eta_ns);
    w->set_last_start_ns(h.last_start_ns);
  }
  ToProto(r.params, out->mutable_params());
}

void ToProto(const JobAnalyses& r, v1::JobAnalyses* out) {
  out->Clear();
  ToProto(r.diverged, out->mutable_diverged());
  ToProto(r.growth, out->mutable_growth());
  ToProto(r.leaks, out->mutable_leaks());
  ToProto(r.peak, out->mutable_peak());
  ToProto(r.headroom, out->mutable_headroom());
  out->set_final_floor_bytes(r.final_floor_bytes);
  out->set_max_peak_bytes(r.max_peak_bytes);
  out->set_max_peak_rank(r.max_peak_rank);
  out->set_ranks(r.ranks);
  out->set_steps(r.steps);
}

void ToProto(const CompareReport& r, v1::CompareReport* out) {
  out->Clear();
  out->set_job_a(r.job_a);
  out->set_job_b(r.job_b);
  ToProto(r.a, out->mutable_a());
  ToProto(r.b, out->mutable_b());
  for (const CompareItem& it : r.items) {
    v1::CompareItem* w = out->add_items();
    w->set_analysis(it.analysis);
    w->set_subject(it.subject);
    w->set_a(it.a);
    w->set_b(it.b);
    w->set_a_value(it.a_value);
    w->set_b_value(it.b_value);
    w->set_changed(it.changed);
  }
}

}  // namespace memtrace::analysis
