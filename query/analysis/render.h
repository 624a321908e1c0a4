// Human-readable terminal tables for the analysis reports, one function per report, from the
// wire messages the CLI receives. Byte counts in binary units ("12.3 GiB"), rates per step,
// times in UTC. Each returns the whole text, ending in a newline; JSON output is the message's
// own proto3 JSON mapping and needs nothing here.
#ifndef MEMTRACE_QUERY_ANALYSIS_RENDER_H_
#define MEMTRACE_QUERY_ANALYSIS_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/memtrace/v1/analysis.pb.h"

namespace memtrace::analysis {

std::string RenderDivergence(const v1::DivergenceReport& report);
std::string RenderGrowth(const v1::GrowthReport& report);
std::string RenderLeaks(const v1::LeakReport& report);
std::string RenderLive(const v1::LiveReport& report);
std::string RenderPeak(const v1::PeakReport& report);
std::string RenderHeadroom(const v1::HeadroomReport& report);
std::string RenderCompare(const v1::CompareReport& report);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_RENDER_H_
