// Converts the analyses' plain reports to their memtrace.v1 wire messages (analysis.proto), and
// request parameters from the wire to the plain structs (unset fields keep the plain defaults).
// This is all the Analysis service needs besides loading the data: params -> analysis ->
// ToProto.
#ifndef MEMTRACE_QUERY_ANALYSIS_REPORT_PROTO_H_
#define MEMTRACE_QUERY_ANALYSIS_REPORT_PROTO_H_

#include "proto/memtrace/v1/analysis.pb.h"
#include "query/analysis/compare.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/headroom.h"
#include "query/analysis/leaks.h"
#include "query/analysis/live.h"
#include "query/analysis/peak.h"

namespace memtrace::analysis {

// Wire -> plain parameters. Fields the request left unset keep the defaults of the plain struct.
DivergenceParams FromProto(const v1::DivergenceParams& p);
GrowthParams FromProto(const v1::GrowthParams& p);
LeakParams FromProto(const v1::LeakParams& p);
LiveParams FromProto(const v1::LiveParams& p);
PeakParams FromProto(const v1::PeakParams& p);
HeadroomParams FromProto(const v1::HeadroomParams& p);
CompareParams FromProto(const v1::CompareParams& p);

// Plain -> wire. Each overwrites `out` entirely.
void ToProto(const DivergenceParams& p, v1::DivergenceParams* out);
void ToProto(const GrowthParams& p, v1::GrowthParams* out);
void ToProto(const LeakParams& p, v1::LeakParams* out);
void ToProto(const LiveParams& p, v1::LiveParams* out);
void ToProto(const PeakParams& p, v1::PeakParams* out);
void ToProto(const HeadroomParams& p, v1::HeadroomParams* out);

void ToProto(const DivergenceReport& r, v1::DivergenceReport* out);
void ToProto(const GrowthReport& r, v1::GrowthReport* out);
void ToProto(const LeakReport& r, v1::LeakReport* out);
void ToProto(const LiveReport& r, v1::LiveReport* out);
void ToProto(const PeakReport& r, v1::PeakReport* out);
void ToProto(const HeadroomReport& r, v1::HeadroomReport* out);
void ToProto(const JobAnalyses& r, v1::JobAnalyses* out);
void ToProto(const CompareReport& r, v1::CompareReport* out);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_REPORT_PROTO_H_
