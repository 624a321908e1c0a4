#include "tools/bench/event_template.h"

#include "tools/sim/recording_sink.h"

namespace memtrace::bench {

absl::StatusOr<EventTemplate> PlayTemplate(const sim::WorkloadOptions& options, int rank) {
  sim::RecordingSink sink;
  if (absl::Status s = sim::PlayRank(options, rank, sink); !s.ok()) return s;
  EventTemplate t;
  t.events = sink.events();
  t.strings = sink.strings();
  for (const Event& e : t.events) t.steps += e.kind == EventKind::kStep;
  if (!t.events.empty()) t.span_ns = t.events.back().ts_ns - t.events.front().ts_ns;
  return t;
}

LapReplayer::LapReplayer(const EventTemplate* t) : t_(t) {}

void LapReplayer::Fill(absl::Span<Event> out) {
  const std::vector<Event>& src = t_->events;
  for (Event& e : out) {
    e = src[next_];
    e.seq = 0;
    e.ts_ns += ts_shift_;
    if (e.kind == EventKind::kStep) e.aux += step_shift_;
    if (e.address != 0) e.address += address_shift_;
    if (++next_ == src.size()) {
      next_ = 0;
      ++lap_;
      ts_shift_ += t_->span_ns + 1'000'000'000;
      step_shift_ += static_cast<uint64_t>(t_->steps);
      address_shift_ += uint64_t{1} << 40;
    }
  }
}

}  // namespace memtrace::bench
