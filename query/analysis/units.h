// Human units for reports and tables: bytes in binary prefixes with three significant digits
// ("12.3 GiB", "512 MiB", "17 B"), signed differences, rates, and durations.
#ifndef MEMTRACE_QUERY_ANALYSIS_UNITS_H_
#define MEMTRACE_QUERY_ANALYSIS_UNITS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memtrace::analysis {

// 17 -> "17 B", 1536 -> "1.50 KiB", 12.3 * 2^30 -> "12.3 GiB", 3 * 2^40 -> "3.00 TiB".
std::string FormatBytes(double bytes);
// With an explicit sign: "+256 MiB", "-1.00 GiB", "0 B".
std::string FormatSignedBytes(double bytes);
// "128 MiB/step"; for a job read on time buckets of bucket_ns (> 0) per second, or per minute
// under 1 MiB/s: "256 MiB/s", "30.0 MiB/min". Per bucket, it read as the buckets the collector
// stores (--bucket_ms) or the analyses' windows of them (bucket_windows.h), whose width the
// reports do not all give: one leak read 128 MiB/bucket in one job and 256 in another.
std::string FormatRate(double bytes_per_step, int64_t bucket_ns = 0);
// Nanoseconds as the largest sensible unit: "850 ms", "45 s", "37 min", "5.2 h", "3.1 d".
std::string FormatDuration(double ns);
// A timeline key as a reader knows it: "step 32", or for a job without step markers, whose keys
// are time-bucket indexes of bucket_ns (> 0), the bucket's start in UTC
// ("2026-12-03 21:07:59 bucket"); `approximate` marks a forecast: "step ~412".
std::string FormatKey(int64_t key, int64_t bucket_ns, bool approximate = false);
// The same without the word "step" for a step: "32", or "2026-12-03 21:07:59" for a bucket
// (table cells under a "step" heading).
std::string FormatKeyValue(int64_t key, int64_t bucket_ns);
// A moment in an error message, to the millisecond: "2026-12-03 21:07:59.125 UTC".
std::string FormatUtcMs(int64_t ns);
// What a rank's subprocess (RankIdentity.subprocess_of_rank) is to its rank: "a subprocess of
// rank 3", or "the process that started rank 3's" (RankIdentity.started_the_rank).
std::string FormatSubprocessOf(int64_t rank, bool started_the_rank);
// The processes stored beside a count of ranks, as a summary line goes on after "2 ranks":
// " and 2 subprocess(es) of them", " and the 2 process(es) that started them" (connected after
// them: RankIdentity.started_the_rank), ", 1 subprocess(es) of them and the 1 process(es) that
// started them", or "" when there are neither.
std::string FormatBesideTheRanks(uint64_t subprocesses, uint64_t parents);
// "0-3,5,7-9": sorted rank numbers with runs collapsed, duplicates once. With `max_items`, at
// most that many items (a rank or a run), then ",... (N ranks)": an error naming every rank of
// "0-2047" that a job of 256 lacks ran to 9 KB, past gRPC's 8 KiB of trailing metadata.
std::string FormatRankList(std::vector<uint32_t> ranks, size_t max_items = SIZE_MAX);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_UNITS_H_
