// A one-line progress bar for reading large files, drawn on a terminal only: when the output is
// not a terminal (a log, a pipe, CI) it prints nothing, so logs hold just the summary lines.
#ifndef MEMTRACE_QUERY_IMPORTERS_PROGRESS_BAR_H_
#define MEMTRACE_QUERY_IMPORTERS_PROGRESS_BAR_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace memtrace::importers {

class ProgressBar {
 public:
  // Draws on `out` when `enabled` (callers pass isatty(fileno(out))). Redraws at most every
  // `interval`, and not before `delay` has passed, so small files never show a bar.
  ProgressBar(std::FILE* out, bool enabled, std::string label,
              absl::Duration delay = absl::Milliseconds(300),
              absl::Duration interval = absl::Milliseconds(100));
  ~ProgressBar();  // Clear()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Reports `done` of `total` bytes; `now` is injectable for tests.
  void Update(uint64_t done, uint64_t total, absl::Time now = absl::Now());
  // Erases the bar if one was drawn. Idempotent.
  void Clear();

  bool drawn() const { return drawn_; }

  // The bar's text for `done` of `total`, e.g. "name  [#######.............]  35%  10.0/28.5 MiB".
  static std::string Render(const std::string& label, uint64_t done, uint64_t total);

 private:
  std::FILE* out_;
  bool enabled_;
  std::string label_;
  absl::Time start_;
  absl::Duration delay_;
  absl::Duration interval_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace memtrace::importers

#endif  // MEMTRACE_QUERY_IMPORTERS_PROGRESS_BAR_H_
