// libFuzzer target over the key codec: every decoder must either reject an arbitrary byte string
// or return parts that encode back to exactly the same bytes.
// bazel build --config=fuzz //collector/store:key_codec_fuzzer
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "collector/store/key_codec.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memtrace::collector;
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto p = DecodeBlockKey(in); p.ok()) Check(BlockKey(p->stream, p->first_seq) == in);
  if (auto p = DecodeRollupKey(in); p.ok()) Check(RollupKey(p->stream, p->axis, p->key) == in);
  if (auto p = DecodeCheckpointKey(in); p.ok()) Check(CheckpointKey(p->stream, p->seq) == in);
  if (auto p = DecodeStreamMetaKey(in); p.ok()) Check(StreamMetaKey(*p) == in);
  if (auto p = DecodeStringMetaKey(in); p.ok()) Check(StringMetaKey(p->stream, p->string_id) == in);
  if (auto p = DecodeCheckpointTsKey(in); p.ok()) Check(CheckpointTsKey(p->stream, p->seq) == in);
  if (auto p = DecodeJobMetaKey(in); p.ok()) Check(JobMetaKey(*p) == in);
  if (auto v = DecodeU32(in); v.ok()) {
    std::string out;
    PutU32(&out, *v);
    Check(out == in);
  }
  if (auto v = DecodeOrderedI64(in); v.ok()) {
    std::string out;
    PutOrderedI64(&out, *v);
    Check(out == in);
  }
  return 0;
}
