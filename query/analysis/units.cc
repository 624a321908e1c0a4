#include "query/analysis/units.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace memtrace::analysis {
namespace {

// Three significant digits. The thresholds are where rounding crosses into the next width, so
// that 9.996 prints "10.0", not "10.00".
std::string ThreeDigits(double v) {
  if (v >= 99.95) return absl::StrFormat("%.0f", v);
  if (v >= 9.995) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.2f", v);
}

}  // namespace

std::string FormatBytes(double bytes) {
  if (!(bytes > 0)) return "0 B";
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  double v = bytes;
  while (v >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f B", std::floor(v));
  // 1023.9 KiB would print "1024 KiB": move to the next unit instead.
  if (std::round(v) >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    v /= 1024;
    ++unit;
  }
  return absl::StrCat(ThreeDigits(v), " ", kUnits[unit]);
}

std::string FormatSignedBytes(double bytes) {
  if (bytes == 0 || std::isnan(bytes)) return "0 B";
  return absl::StrCat(bytes > 0 ? "+" : "-", FormatBytes(std::fabs(bytes)));
}

std::string FormatRate(double bytes_per_step, int64_t bucket_ns) {
  const char* sign = bytes_per_step < 0 ? "-" : "";
  if (bucket_ns <= 0) return absl::StrCat(sign, FormatBytes(std::fabs(bytes_per_step)), "/step");
  const double per_s = std::fabs(bytes_per_step) * 1e9 / static_cast<double>(bucket_ns);
  constexpr double kOneMiB = 1 << 20;
  return per_s >= kOneMiB || per_s == 0 ? absl::StrCat(sign, FormatBytes(per_s), "/s")
                                        : absl::StrCat(sign, FormatBytes(per_s * 60), "/min");
}

std::string FormatDuration(double ns) {
  if (!(ns > 0)) return "0 s";
  double s = ns / 1e9;
  if (s < 1) return absl::StrFormat("%.0f ms", ns / 1e6);
  if (s < 120) return absl::StrFormat("%.0f s", s);
  if (s < 2 * 3600) return absl::StrFormat("%.0f min", s / 60);
  if (s < 2 * 86400) return absl::StrCat(ThreeDigits(s / 3600), " h");
  return absl::StrCat(ThreeDigits(s / 86400), " d");
}

std::string FormatKeyValue(int64_t key, int64_t bucket_ns) {
  if (bucket_ns <= 0) return absl::StrCat(key);
  // key * bucket_ns in 128 bits: a key far from any real time must not wrap into one.
  const __int128 ns = static_cast<__int128>(key) * bucket_ns;
  if (ns > INT64_MAX || ns < INT64_MIN) return absl::StrCat("bucket ", key);
  // Buckets shorter than a second need the milliseconds to tell neighbours apart.
  const char* format = bucket_ns % 1'000'000'000 == 0 ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d %H:%M:%E3S";
  return absl::FormatTime(format, absl::FromUnixNanos(static_cast<int64_t>(ns)),
                          absl::UTCTimeZone());
}

std::string FormatUtcMs(int64_t ns) {
  return absl::StrCat(
      absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixNanos(ns), absl::UTCTimeZone()),
      " UTC");
}

std::string FormatSubprocessOf(int64_t rank, bool started_the_rank) {
  return started_the_rank ? absl::StrCat("the process that started rank ", rank, "'s")
                          : absl::StrCat("a subprocess of rank ", rank);
}

std::string FormatBesideTheRanks(uint64_t subprocesses, uint64_t parents) {
  std::vector<std::string> parts;
  if (subprocesses > 0) parts.push_back(absl::StrCat(subprocesses, " subprocess(es) of them"));
  if (parents > 0) parts.push_back(absl::StrCat("the ", parents, " process(es) that started them"));
  if (parts.empty()) return "";
  return absl::StrCat(parts.size() == 2 ? ", " : " and ", absl::StrJoin(parts, " and "));
}

std::string FormatRankList(std::vector<uint32_t> ranks, size_t max_items) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    if (parts.size() == max_items) {
      parts.push_back(absl::StrCat("... (", ranks.size(), " ranks)"));
      break;
    }
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string FormatKey(int64_t key, int64_t bucket_ns, bool approximate) {
  const char* about = approximate ? "~" : "";
  if (bucket_ns <= 0) return absl::StrCat("step ", about, key);
  return absl::StrCat(about, FormatKeyValue(key, bucket_ns), " bucket");
}

}  // namespace memtrace::analysis
