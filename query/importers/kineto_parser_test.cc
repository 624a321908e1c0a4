#include "query/importers/kineto_parser.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/test_dirs.h"

namespace memtrace::importers {
namespace {

std::string MemoryEvent(const std::string& ts, long long bytes, long long addr, long long total,
                        int device_type = 1, int device_id = 0, int tid = 7) {
  return "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", "
         "\"pid\": 100, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + ts +
         ", \"args\": {\"Total Reserved\": 2097152, \"Total Allocated\": " + std::to_string(total) +
         ", \"Bytes\": " + std::to_string(bytes) + ", \"Addr\": " + std::to_string(addr) +
         ", \"Device Id\": " + std::to_string(device_id) +
         ", \"Device Type\": " + std::to_string(device_type) + ", \"Ev Idx\": 3}}";
}

// A small trace shaped like PyTorch's: metadata, nested args to skip, distributedInfo after
// traceEvents, a GPU-timeline copy of the step range.
std::string SampleTrace() {
  return R"json({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H100",
   "totalGlobalMem": 85018279936, "computeMajor": 9}],
  "traceEvents": [
   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 7, "ts": 5, "dur": 2,
    "args": {"Input Dims": [[2, 3], [3, 4]], "nested": {"deep": [1, {"x": "y"}]}}},
   {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#12", "pid": 100, "tid": 7,
    "ts": 1428625731896.179, "dur": 47151.395, "args": {}},
   {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#12", "pid": 0, "tid": 7,
    "ts": 1428625746382.662, "dur": 34892.421},
   {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 100, "tid": 7,
    "ts": 1428625740000, "dur": 1000},
   {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 100, "tid": 7,
    "ts": 1428625740050, "dur": 100, "args": {"Python id": 5}},
   {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1743)",
    "pid": 100, "tid": 7, "ts": 1428625740050, "dur": 100},
   )json" +
         MemoryEvent("1428625740100.715", 1024, 139926520725504, 4096) + ",\n" +
         MemoryEvent("1428625740200", -1024, 139926520725504, 3072) + ",\n" +
         MemoryEvent("1428625740300.5", 8, 1318913728, 8, 0, -1) + R"(,
   {"ph": "i", "name": "[memory]", "pid": 100, "tid": 7, "ts": 1, "args": {"Bytes": 5}},
   {"name": "process_name", "ph": "M", "pid": "Spans", "tid": 0, "args": {"name": "x"}}
  ],
  "traceName": "t.json", "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "baseTimeNanoseconds": 1751410836000000000})";
}

TEST(KinetoParserTest, KeepsMemoryStepAndAnnotationRecordsAndCountsTheRest) {
  auto trace = ParseKinetoJson(SampleTrace(), "sample.json");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->counts.trace_events, 11u);
  EXPECT_EQ(trace->counts.memory_events, 3u);
  EXPECT_EQ(trace->counts.memory_skipped, 1u);  // no Addr
  EXPECT_EQ(trace->counts.step_ranges, 2u);
  EXPECT_EQ(trace->counts.annotation_ranges, 1u);
  EXPECT_EQ(trace->counts.module_ranges, 1u);  // the other python_function is not a module
  ASSERT_EQ(trace->memory.size(), 3u);
  const KinetoMemoryRecord& alloc = trace->memory[0];
  EXPECT_EQ(alloc.ts_ns, 1428625740100715);  // exact: no double rounding
  EXPECT_EQ(alloc.bytes, 1024);
  EXPECT_EQ(alloc.address, 139926520725504u);
  EXPECT_EQ(alloc.total_allocated, 4096);
  EXPECT_EQ(alloc.total_reserved, 2097152);
  EXPECT_EQ(alloc.device_type, kKinetoDeviceCuda);
  EXPECT_EQ(alloc.device_id, 0);
  EXPECT_EQ(alloc.ev_idx, 3);
  EXPECT_EQ(alloc.thread, ThreadKey(100, 7));
  EXPECT_EQ(trace->memory[1].bytes, -1024);
  EXPECT_EQ(trace->memory[2].device_type, kKinetoDeviceCpu);
  EXPECT_EQ(trace->memory[2].device_id, -1);
  EXPECT_EQ(trace->memory[2].ts_ns, 1428625740300500);
  ASSERT_EQ(trace->steps.size(), 2u);
  EXPECT_EQ(trace->steps[0].step, 12);
  EXPECT_FALSE(trace->steps[0].gpu);
  EXPECT_EQ(trace->steps[0].range.start_ns, 1428625731896179);
  EXPECT_EQ(trace->steps[0].range.end_ns, 1428625731896179 + 47151395);
  EXPECT_TRUE(trace->steps[1].gpu);
  ASSERT_EQ(trace->annotations.size(), 2u);
  EXPECT_EQ(trace->names[trace->annotations[0].name], "forward");
  EXPECT_EQ(trace->names[trace->annotations[1].name], "nn.Module: Linear_0");
}

TEST(KinetoParserTest, ModuleScopesCanBeLeftOut) {
  KinetoParseOptions options;
  options.module_tags = false;
  auto trace = ParseKinetoJson(SampleTrace(), "sample.json", options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->counts.module_ranges, 0u);
  ASSERT_EQ(trace->annotations.size(), 1u);
  EXPECT_EQ(trace->names[trace->annotations[0].name], "forward");
}

TEST(KinetoParserTest, ReadsFileLevelFactsWhereverTheyAppear) {
  auto trace = ParseKinetoJson(SampleTrace(), "sample.json");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->distributed.rank, 3);
  EXPECT_EQ(trace->distributed.world_size, 8);
  EXPECT_EQ(trace->distributed.backend, "nccl");
  EXPECT_EQ(trace->base_time_ns, 1751410836000000000);
  ASSERT_EQ(trace->device_total_bytes.size(), 1u);
  EXPECT_EQ(trace->device_total_bytes[0], 85018279936u);
  EXPECT_EQ(trace->first_pid, 100);
}

TEST(KinetoParserTest, AcceptsTheBareArrayForm) {
  auto trace = ParseKinetoJson("[" + MemoryEvent("10", 64, 4096, 64) + "]", "array.json");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->counts.memory_events, 1u);
  EXPECT_FALSE(trace->distributed.rank.has_value());
}

// Found by the Kineto fuzzer under UBSan: Bytes or Total Allocated of -2^63 overflowed the
// importer's sums. Byte counts past +-2^53 and times past +-2^62 ns are not kept.
TEST(KinetoParserTest, ValuesOutOfRangeAreNotKept) {
  const auto memory = [](const std::string& ts, const std::string& bytes,
                         const std::string& total) {
    return R"({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": )" + ts +
           R"(, "args": {"Addr": 4096, "Bytes": )" + bytes + R"(, "Total Allocated": )" + total +
           R"(, "Device Id": 0, "Device Type": 1}})";
  };
  const std::string json =
      R"({"baseTimeNanoseconds": 9223372036854775807, "traceEvents": [)" +
      memory("1", "9007199254740992", "9007199254740992") + ", " +  // 2^53: kept
      memory("2", "9007199254740993", "0") + ", " +                 // Bytes past 2^53
      memory("3", "-9223372036854775808", "0") + ", " +             // Bytes -2^63
      memory("4", "64", "-9223372036854775808") + ", " +            // Total Allocated -2^63
      memory("4611686018427388", "64", "64") + ", " +               // ts past 2^62 ns
      memory("4611686018427387.904", "64", "64") + "]}";            // ts of 2^62 ns exactly
  auto trace = ParseKinetoJson(json, "range.json");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->memory.size(), 1u);
  EXPECT_EQ(trace->memory[0].bytes, int64_t{1} << 53);
  EXPECT_EQ(trace->counts.memory_skipped, 5u);  // Total Allocated out of range too
  EXPECT_EQ(trace->base_time_ns, 0);  // past 2^62 ns: as if absent
  // 2^62 itself is out too: two of them overflow a sum (base + ts, ts + dur).
  auto at_bound = ParseKinetoJson(
      R"({"baseTimeNanoseconds": 4611686018427387904, "traceEvents": []})", "bound.json");
  ASSERT_TRUE(at_bound.ok()) << at_bound.status();
  EXPECT_EQ(at_bound->base_time_ns, 0);
}

// Found by checking imports of real traces with one value changed: an argument that is no
// number of its kind was read as absent (0, or the field's default), and the record kept.
TEST(KinetoParserTest, AMemoryEventWithAMalformedArgumentIsNotKept) {
  const auto with = [](const std::string& field, const std::string& value) {
    std::string event = MemoryEvent("10", 64, 4096, 64);
    const std::string key = "\"" + field + "\": ";
    const size_t at = event.find(key);
    EXPECT_NE(at, std::string::npos) << field;
    const size_t end = event.find_first_of(",}", at);
    return event.replace(at + key.size(), end - at - key.size(), value);
  };
  const std::vector<std::string> malformed = {
      with("Device Type", "\"1\""),  // CUDA read as host memory
      with("Device Id", "null"),
      with("Bytes", "64.5"),  // rounded to 65 bytes
      with("Total Allocated", "\"64\""),
      with("Device Id", "4294967296"),  // past an int32
      with("Addr", "{}"),
  };
  std::string json = "[" + MemoryEvent("1", 64, 4096, 64);
  for (const std::string& event : malformed) json += ",\n" + event;
  // Integral values written as doubles are whole numbers all the same.
  json += ",\n" + with("Bytes", "-64.0");
  // Kept without a Total Reserved (a string: it was a device sample of 0 B) or an Ev Idx (an
  // order's tie-break): skipped, a free left its block live for ever.
  json += ",\n" + with("Total Reserved", "\"2097152\"") + ",\n" + with("Ev Idx", "[3]") + "]";
  auto trace = ParseKinetoJson(json, "malformed.json");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->counts.memory_skipped, malformed.size());
  EXPECT_EQ(trace->counts.memory_args_unread, 2u);
  ASSERT_EQ(trace->memory.size(), 4u);
  EXPECT_EQ(trace->memory[1].bytes, -64);
  EXPECT_EQ(trace->memory[1].device_type, 1);
  EXPECT_EQ(trace->memory[1].total_reserved, 2097152);
  EXPECT_EQ(trace->memory[2].total_reserved, -1);
  EXPECT_EQ(trace->memory[2].ev_idx, 3);
  EXPECT_EQ(trace->memory[3].total_reserved, 2097152);
  EXPECT_EQ(trace->memory[3].ev_idx, -1);
}

TEST(KinetoParserTest, MalformedJsonNamesFileAndOffset) {
  std::string json = SampleTrace();
  size_t at = json.find("\"Bytes\": 1024");
  json.replace(at, 13, "\"Bytes\" 1024");  // a missing colon
  auto trace = ParseKinetoJson(json, "broken.json");
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kDataLoss);
  std::string message(trace.status().message());
  EXPECT_NE(message.find("broken.json: malformed JSON at byte " + std::to_string(at + 8)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("colon"), std::string::npos) << message;
  EXPECT_EQ(message.find("truncated file?"), std::string::npos) << message;  // mid-file
}

TEST(KinetoParserTest, TruncatedJsonIsAnErrorAtTheEnd) {
  std::string json = SampleTrace().substr(0, 900);
  auto trace = ParseKinetoJson(json, "cut.json");
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("cut.json: malformed JSON at byte 900"),
            std::string::npos)
      << trace.status();
  EXPECT_NE(trace.status().message().find("(the data ends there: a truncated file?)"),
            std::string::npos)
      << trace.status();
}

// 100000 nested arrays, at the top or in an event's args: the recursive parser overflowed the
// stack (SIGSEGV, no message). Now it is JSON like any other: a top-level array is the array form
// of a trace, here with no events in it.
TEST(KinetoParserTest, DeepNestingIsParsedWithoutRecursion) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto top = ParseKinetoJson(deep, "deep.json");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_TRUE(top->memory.empty());
  auto in_args = ParseKinetoJson(
      absl::StrCat(R"({"traceEvents": [{"ph": "i", "name": "x", "args": {"a": )", deep, "}}]}"),
      "deep-args.json");
  EXPECT_TRUE(in_args.ok()) << in_args.status();
}

TEST(KinetoParserTest, WellFormedJsonWithoutTraceEventsIsRefused) {
  auto trace = ParseKinetoJson(R"({"schemaVersion": 1})", "other.json");
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kDataLoss);  // exit 1, as malformed JSON
  EXPECT_NE(trace.status().message().find("no traceEvents"), std::string::npos);
}

TEST(KinetoParserTest, HeaderIsWhatComesBeforeTheEvents) {
  const std::string events = "\"traceEvents\": [" + MemoryEvent("10", 64, 4096, 64) + "]";
  auto first = ReadKinetoJsonHeader(
      "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 5, \"world_size\": 16}, " + events +
          "}",
      "first.json");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rank, 5);
  EXPECT_EQ(first->world_size, 16);
  EXPECT_EQ(first->backend, "nccl");
  // After the events it is not read: only a full parse finds it there.
  auto after = ReadKinetoJsonHeader(SampleTrace(), "sample.json");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->rank.has_value());
  auto bare = ReadKinetoJsonHeader("[" + MemoryEvent("10", 64, 4096, 64) + "]", "array.json");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_FALSE(bare->rank.has_value());
}

TEST(KinetoParserTest, HeaderReadsNothingOfTheEvents) {
  // Malformed inside the events, and cut short: the header does not get that far.
  auto cut = ReadKinetoJsonHeader(
      "{\"distributedInfo\": {\"rank\": 1}, \"traceEvents\": [{\"ph\" \"i\"", "cut.json");
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->rank, 1);
}

TEST(KinetoParserTest, HeaderErrorsAreTheParsersForWhatItReads) {
  auto broken = ReadKinetoJsonHeader("{\"distributedInfo\": {\"rank\" 1}}", "broken.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(broken.status().message().find("broken.json: malformed JSON at byte 28"),
            std::string::npos)
      << broken.status();
  auto other = ReadKinetoJsonHeader(R"({"schemaVersion": 1})", "other.json");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDataLoss);
  auto missing = ReadKinetoHeader(test_util::TmpPath("no-such-trace.json"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(KinetoParserTest, HeaderOfAGzipFileComesFromItsFirstBytes) {
  std::string gz = test_util::TmpPath("header.json.gz");
  const std::string json = "{\"distributedInfo\": {\"rank\": 7}, \"traceEvents\": [" +
                           MemoryEvent("10", 64, 4096, 64) + "]}";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, json.data(), json.size());
  gzclose(f);
  auto header = ReadKinetoHeader(gz);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->rank, 7);
}

TEST(KinetoParserTest, PlainAndGzipFilesParseAlike) {
  std::string plain = test_util::TmpPath("trace.json");
  std::ofstream(plain) << SampleTrace();
  std::string gz = test_util::TmpPath("trace.json.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, SampleTrace().data(), SampleTrace().size());
  gzclose(f);
  uint64_t progress_calls = 0;
  KinetoParseOptions options;
  options.progress = [&](uint64_t, uint64_t) { ++progress_calls; };
  auto a = ParseKinetoFile(plain, options);
  auto b = ParseKinetoFile(gz, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->counts.memory_events, 3u);
  EXPECT_EQ(b->counts.memory_events, 3u);
  EXPECT_EQ(a->counts.trace_events, b->counts.trace_events);
  EXPECT_EQ(a->memory[0].ts_ns, b->memory[0].ts_ns);
  EXPECT_GT(progress_calls, 0u);
}

TEST(KinetoParserTest, TruncatedGzipFileReportsTheGzipCause) {
  std::string gz = test_util::TmpPath("cut.json.gz");
  std::string big;
  for (int i = 0; i < 2000; ++i) big += MemoryEvent(std::to_string(i), 64, 4096 + i * 64, 64) + ",";
  std::string json = "{\"traceEvents\": [" + big + MemoryEvent("9999", 1, 1, 1) + "]}";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, json.data(), json.size());
  gzclose(f);
  std::ifstream in(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(gz, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  auto trace = ParseKinetoFile(gz);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kDataLoss);
  std::string message(trace.status().message());
  EXPECT_NE(message.find(gz), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find("of the decompressed data"), std::string::npos) << message;
}

TEST(KinetoParserTest, MalformedGzipContentCountsDecompressedBytes) {
  std::string gz = test_util::TmpPath("bad.json.gz");
  std::string json = "{\"traceEvents\": [{\"ph\": \"i\",, }]}";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, json.data(), json.size());
  gzclose(f);
  auto trace = ParseKinetoFile(gz);
  ASSERT_FALSE(trace.ok());
  // The second comma, where a member name should be.
  size_t at = json.find(",,") + 1;
  EXPECT_NE(trace.status().message().find("malformed JSON at byte " + std::to_string(at) +
                                          " of the decompressed data"),
            std::string::npos)
      << trace.status();
}

TEST(KinetoParserTest, UnreadableFileNamesIt) {
  auto trace = ParseKinetoFile(test_util::TmpPath("missing_rank0.json"));
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(trace.status().message().find("missing_rank0.json: cannot open"), std::string::npos);
}

TEST(KinetoParserTest, MicrosecondsConvertExactly) {
  int64_t ns = 0;
  EXPECT_TRUE(ParseMicrosToNanos("1669783687464300", &ns));
  EXPECT_EQ(ns, 1669783687464300000);
  EXPECT_TRUE(ParseMicrosToNanos("1414456661820.89", &ns));
  EXPECT_EQ(ns, 1414456661820890);
  EXPECT_TRUE(ParseMicrosToNanos("0.0015", &ns));
  EXPECT_EQ(ns, 2);  // 1.5 ns rounds half up
  EXPECT_TRUE(ParseMicrosToNanos("-2.5", &ns));
  EXPECT_EQ(ns, -2500);
  EXPECT_TRUE(ParseMicrosToNanos("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  EXPECT_FALSE(ParseMicrosToNanos("abc", &ns));
  EXPECT_FALSE(ParseMicrosToNanos("99999999999999999999", &ns));
}

}  // namespace
}  // namespace memtrace::importers
