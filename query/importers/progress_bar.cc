#include "query/importers/progress_bar.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace memtrace::importers {

ProgressBar::ProgressBar(std::FILE* out, bool enabled, std::string label, absl::Duration delay,
                         absl::Duration interval)
    : out_(out),
      enabled_(enabled && out != nullptr),
      label_(std::move(label)),
      start_(absl::Now()),
      delay_(delay),
      interval_(interval) {}

ProgressBar::~ProgressBar() { Clear(); }

std::string ProgressBar::Render(const std::string& label, uint64_t done, uint64_t total) {
  constexpr int kWidth = 30;
  double fraction = total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / total);
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '.');
  constexpr double kMiBytes = 1024.0 * 1024.0;
  return absl::StrFormat("%s  [%s] %3d%%  %.1f/%.1f MiB", label, bar,
                         static_cast<int>(fraction * 100), done / kMiBytes, total / kMiBytes);
}

void ProgressBar::Update(uint64_t done, uint64_t total, absl::Time now) {
  if (!enabled_ || now - start_ < delay_ || now - last_draw_ < interval_) return;
  last_draw_ = now;
  // \r + erase-line: redraw in place without scrolling.
  std::fprintf(out_, "\r\033[K%s", Render(label_, done, total).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::Clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace memtrace::importers
