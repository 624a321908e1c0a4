// Human units for reports and tables: bytes in binary prefixes with three significant digits
// ("12.3 GiB", "512 MiB", "17 B"), signed differences, rates, and durations.
#ifndef MEMTRACE_QUERY_ANALYSIS_UNITS_H_
#define MEMTRACE_QUERY_ANALYSIS_UNITS_H_

#include <cstdint>
#include <string>

namespace memtrace::analysis {

// 17 -> "17 B", 1536 -> "1.50 KiB", 12.3 * 2^30 -> "12.3 GiB", 3 * 2^40 -> "3.00 TiB".
std::string FormatBytes(double bytes);
// With an explicit sign: "+256 MiB", "-1.00 GiB", "0 B".
std::string FormatSignedBytes(double bytes);
// "128 MiB/step".
std::string FormatRate(double bytes_per_step);
// Nanoseconds as the largest sensible unit: "850 ms", "45 s", "37 min", "5.2 h", "3.1 d".
std::string FormatDuration(double ns);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_UNITS_H_
