#include "proto/codec/fuzz/seed_batches.h"

#include "proto/codec/batch_codec.h"
#include "proto/memtrace/v1/events.pb.h"

namespace memtrace::fuzz {

std::vector<std::pair<std::string, std::string>> SeedBatches() {
  std::vector<Event> events;
  uint64_t seq = 1;
  for (int i = 0; i < 6; ++i) {
    Event e;
    e.seq = seq++;
    e.ts_ns = 1'700'000'000'000'000'000 + i * 1000;
    e.kind = i % 3 == 2 ? EventKind::kFree : EventKind::kAlloc;
    e.address = 0x7f0000000000 + (i / 3) * 4096;
    e.bytes = i % 3 == 2 ? 0 : 2 << 20;
    e.tag_id = 1;
    e.source_id = i % 2 ? 2 : 0;
    e.memory_kind = 3;
    events.push_back(e);
  }
  Event step;
  seq += 3;  // a gap: exercises the seq_delta column
  step.seq = seq;
  step.kind = EventKind::kStep;
  step.aux = 12;
  step.ts_ns = events.back().ts_ns - 5;  // backwards in time
  events.push_back(step);
  Event loss;
  loss.seq = ++seq;
  loss.kind = EventKind::kLoss;
  loss.aux = 42;
  loss.memory_kind = 2;
  events.push_back(loss);
  const std::vector<StringDef> strings = {{1, StringKind::kTag, "fsdp:layers.0"},
                                          {2, StringKind::kSource, "libnccl.so.2"}};
  const AgentCounterValues counters{8, 42, 4096, 1, 0};

  std::vector<std::pair<std::string, std::string>> out;
  v1::EventBatch batch;
  EncodeBatch(events, strings, counters, &batch);
  out.emplace_back("seed-mixed", batch.SerializeAsString());
  EncodeBatch(absl::MakeConstSpan(events).subspan(0, 2), {}, {}, &batch);
  out.emplace_back("seed-two", batch.SerializeAsString());
  EncodeBatch({}, strings, counters, &batch);
  out.emplace_back("seed-strings-only", batch.SerializeAsString());
  EncodeBatch(events, {}, counters, &batch);
  batch.mutable_clock()->set_offset_ns(-2'500'000'000);
  batch.mutable_clock()->set_round_trip_ns(180'000);
  out.emplace_back("seed-clock", batch.SerializeAsString());
  return out;
}

}  // namespace memtrace::fuzz
