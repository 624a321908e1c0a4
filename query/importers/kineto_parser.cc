#include "query/importers/kineto_parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "query/importers/compressed_input.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"

namespace memtrace::importers {
namespace {

// Numbers arrive as text (kParseNumbersAsStringsFlag) so that microsecond timestamps with a
// fraction and 64-bit addresses convert exactly instead of through a double. Iteratively
// (kParseIterativeFlag): the recursive parser overflowed the stack on 100000 nested arrays, and
// the import died of SIGSEGV without a word.
constexpr unsigned kParseFlags = rapidjson::kParseNumbersAsStringsFlag |
                                 rapidjson::kParseTrailingCommasFlag |
                                 rapidjson::kParseIterativeFlag;

constexpr absl::string_view kMemoryEventName = "[memory]";
constexpr absl::string_view kStepPrefix = "ProfilerStep#";
constexpr absl::string_view kModulePrefix = "nn.Module: ";

bool ParseInt64(absl::string_view text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (ec == std::errc() && ptr == end) return true;
  // "1e3" or "12.0": a double, accepted when it is integral-valued in range (5242880.5 bytes is
  // no byte count; rounded, it was stored as 5242881).
  double d = 0;
  if (!absl::SimpleAtod(text, &d) || !std::isfinite(d) || d < -9.2e18 || d > 9.2e18 ||
      d != std::trunc(d)) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

// A byte count (Bytes, Total Allocated, Total Reserved) within +-2^53: more than any device
// holds, and the most a JSON writer that goes through doubles keeps exact. Larger values are
// not byte counts; kept, their sums overflowed (found by the Kineto fuzzer under UBSan).
constexpr int64_t kMaxByteCount = int64_t{1} << 53;
// A time strictly within +-2^62 ns (year 2116): a base time and a ts that each fit add up
// without overflowing, as do a ts and a duration (2^62 + 2^62 would not).
constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

bool ParseByteCount(absl::string_view text, int64_t* out) {
  int64_t value = 0;
  if (!ParseInt64(text, &value) || value < -kMaxByteCount || value > kMaxByteCount) return false;
  *out = value;
  return true;
}

bool ParseTimeNs(absl::string_view text, int64_t* out, bool micros) {
  int64_t value = 0;
  if (!(micros ? ParseMicrosToNanos(text, &value) : ParseInt64(text, &value)) ||
      value <= -kMaxTimeNs || value >= kMaxTimeNs) {
    return false;
  }
  *out = value;
  return true;
}

bool ParseAddress(absl::string_view text, uint64_t* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (ec == std::errc() && ptr == end) return true;
  int64_t signed_value = 0;
  if (!ParseInt64(text, &signed_value)) return false;
  *out = static_cast<uint64_t>(signed_value);
  return true;
}

// Device Type / Device Id: small integers (an int32 field of KinetoMemoryRecord).
bool ParseDeviceField(absl::string_view text, int32_t* out) {
  int64_t value = 0;
  if (!ParseInt64(text, &value) || value < std::numeric_limits<int32_t>::min() ||
      value > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  *out = static_cast<int32_t>(value);
  return true;
}

uint64_t ThreadPart(absl::string_view text, bool is_number) {
  int64_t value = 0;
  if (is_number && ParseInt64(text, &value)) return static_cast<uint64_t>(value);
  return std::hash<std::string_view>{}(std::string_view(text.data(), text.size())) |
         (uint64_t{1} << 63);
}

// Which field the last key named, resolved once per key against the enclosing object.
enum class Field : uint8_t {
  kNone,
  // root object
  kTraceEvents,
  kDistributedInfo,
  kDeviceProperties,
  kBaseTime,
  // trace event
  kPh,
  kName,
  kCat,
  kTs,
  kDur,
  kPid,
  kTid,
  kArgs,
  // args of a memory event
  kAddr,
  kBytes,
  kTotalAllocated,
  kTotalReserved,
  kDeviceType,
  kDeviceId,
  kEvIdx,
  // distributedInfo
  kRank,
  kWorldSize,
  kBackend,
  // deviceProperties entry
  kId,
  kTotalGlobalMem,
};

enum class Context : uint8_t {
  kRoot,
  kRootObject,
  kTraceEvents,
  kEvent,
  kArgs,
  kDistributed,
  kDeviceList,
  kDevice,
};

// One trace event while its object is open. Fields are reset, not reallocated, per event.
struct PendingEvent {
  std::string name, ph, cat;
  bool has_ts = false, has_dur = false, has_addr = false, has_bytes = false;
  // An argument of a memory event present with no number of its range (a string, null, 12.5):
  // one the record stands on (Addr, Bytes, Total Allocated, Device Type, Device Id) and it is
  // not kept ("Device Type": "1" moved a CUDA block to host memory without a word); Total
  // Reserved (a device sample, "x" became one of 0 B) or Ev Idx (an order's tie-break) and it
  // is kept without that one (total_reserved -1, ev_idx -1): a block skipped for either stayed
  // live for ever, or its free made up a block from before the trace.
  bool malformed_arg = false;
  bool unread_arg = false;
  int64_t ts_ns = 0, dur_ns = 0;
  uint64_t pid = 0, tid = 0;
  KinetoMemoryRecord memory;

  void Reset() {
    name.clear();
    ph.clear();
    cat.clear();
    has_ts = has_dur = has_addr = has_bytes = malformed_arg = unread_arg = false;
    ts_ns = dur_ns = 0;
    pid = tid = 0;
    memory = KinetoMemoryRecord{};
  }
};

class KinetoHandler {
 public:
  // `header_only`: stop where the trace events begin (StartArray returns false, which ends
  // RapidJSON's parse with kParseErrorTermination), keeping what came before them.
  KinetoHandler(KinetoTrace* trace, bool module_tags, bool header_only = false)
      : trace_(trace), module_tags_(module_tags), header_only_(header_only) {
    stack_.push_back(Context::kRoot);
  }

  bool saw_trace_events() const { return saw_trace_events_; }

  // --- RapidJSON SAX interface ---
  bool Null() { return Scalar(absl::string_view(), false); }
  bool Bool(bool) { return Scalar(absl::string_view(), false); }
  // Never called under kParseNumbersAsStringsFlag, but the handler concept requires them.
  bool Int(int) { return true; }
  bool Uint(unsigned) { return true; }
  bool Int64(int64_t) { return true; }
  bool Uint64(uint64_t) { return true; }
  bool Double(double) { return true; }
  bool RawNumber(const char* str, rapidjson::SizeType length, bool) {
    return Scalar(absl::string_view(str, length), true);
  }
  bool String(const char* str, rapidjson::SizeType length, bool) {
    return Scalar(absl::string_view(str, length), false);
  }

  bool Key(const char* str, rapidjson::SizeType length, bool) {
    if (skip_depth_ > 0) return true;
    field_ = Resolve(stack_.back(), absl::string_view(str, length));
    return true;
  }

  bool StartObject() {
    if (skip_depth_ > 0) return ++skip_depth_, true;
    Context here = stack_.back();
    Field field = field_;
    field_ = Field::kNone;
    if (here == Context::kRoot) return Push(Context::kRootObject);
    if (here == Context::kTraceEvents) {
      event_.Reset();
      return Push(Context::kEvent);
    }
    if (here == Context::kRootObject && field == Field::kDistributedInfo) {
      return Push(Context::kDistributed);
    }
    if (here == Context::kEvent && field == Field::kArgs) return Push(Context::kArgs);
    if (here == Context::kArgs) MarkMalformed(field);
    if (here == Context::kDeviceList) {
      device_id_ = -1;
      device_total_ = 0;
      return Push(Context::kDevice);
    }
    return ++skip_depth_, true;
  }

  bool EndObject(rapidjson::SizeType) {
    if (skip_depth_ > 0) return --skip_depth_, true;
    Context closing = stack_.back();
    stack_.pop_back();
    if (closing == Context::kEvent) FinishEvent();
    if (closing == Context::kDevice) FinishDevice();
    field_ = Field::kNone;
    return true;
  }

  bool StartArray() {
    if (skip_depth_ > 0) return ++skip_depth_, true;
    Context here = stack_.back();
    Field field = field_;
    field_ = Field::kNone;
    if (here == Context::kRoot || (here == Context::kRootObject && field == Field::kTraceEvents)) {
      saw_trace_events_ = true;
      if (header_only_) return false;
      return Push(Context::kTraceEvents);
    }
    if (here == Context::kRootObject && field == Field::kDeviceProperties) {
      return Push(Context::kDeviceList);
    }
    if (here == Context::kArgs) MarkMalformed(field);
    return ++skip_depth_, true;
  }

  bool EndArray(rapidjson::SizeType) {
    if (skip_depth_ > 0) return --skip_depth_, true;
    stack_.pop_back();
    field_ = Field::kNone;
    return true;
  }

 private:
  bool Push(Context context) {
    stack_.push_back(context);
    return true;
  }

  // `field`, an argument of the event's args, held no number of its range (PendingEvent::
  // malformed_arg). Addr and Bytes need none: has_addr / has_bytes stay false.
  void MarkMalformed(Field field) {
    switch (field) {
      case Field::kTotalAllocated:
      case Field::kDeviceType:
      case Field::kDeviceId:
        event_.malformed_arg = true;
        break;
      case Field::kTotalReserved:
        event_.unread_arg = true;
        event_.memory.total_reserved = -1;
        break;
      case Field::kEvIdx:
        event_.unread_arg = true;
        event_.memory.ev_idx = -1;
        break;
      default:
        break;
    }
  }

  static Field Resolve(Context context, absl::string_view key) {
    switch (context) {
      case Context::kRootObject:
        if (key == "traceEvents") return Field::kTraceEvents;
        if (key == "distributedInfo") return Field::kDistributedInfo;
        if (key == "deviceProperties") return Field::kDeviceProperties;
        if (key == "baseTimeNanoseconds") return Field::kBaseTime;
        return Field::kNone;
      case Context::kEvent:
        if (key == "ph") return Field::kPh;
        if (key == "name") return Field::kName;
        if (key == "cat") return Field::kCat;
        if (key == "ts") return Field::kTs;
        if (key == "dur") return Field::kDur;
        if (key == "pid") return Field::kPid;
        if (key == "tid") return Field::kTid;
        if (key == "args") return Field::kArgs;
        return Field::kNone;
      case Context::kArgs:
        if (key == "Addr") return Field::kAddr;
        if (key == "Bytes") return Field::kBytes;
        if (key == "Total Allocated") return Field::kTotalAllocated;
        if (key == "Total Reserved") return Field::kTotalReserved;
        if (key == "Device Type") return Field::kDeviceType;
        if (key == "Device Id") return Field::kDeviceId;
        if (key == "Ev Idx") return Field::kEvIdx;
        return Field::kNone;
      case Context::kDistributed:
        if (key == "rank") return Field::kRank;
        if (key == "world_size") return Field::kWorldSize;
        if (key == "backend") return Field::kBackend;
        return Field::kNone;
      case Context::kDevice:
        if (key == "id") return Field::kId;
        if (key == "totalGlobalMem") return Field::kTotalGlobalMem;
        return Field::kNone;
      default:
        return Field::kNone;
    }
  }

  // A string, number, bool or null value of the current key.
  bool Scalar(absl::string_view text, bool is_number) {
    if (skip_depth_ > 0) return true;
    Field field = field_;
    field_ = Field::kNone;
    int64_t value = 0;
    switch (field) {
      case Field::kBaseTime:
        if (is_number && ParseTimeNs(text, &value, /*micros=*/false)) trace_->base_time_ns = value;
        break;
      case Field::kPh:
        event_.ph.assign(text.data(), text.size());
        break;
      case Field::kName:
        event_.name.assign(text.data(), text.size());
        break;
      case Field::kCat:
        event_.cat.assign(text.data(), text.size());
        break;
      case Field::kTs:
        event_.has_ts = is_number && ParseTimeNs(text, &event_.ts_ns, /*micros=*/true);
        break;
      case Field::kDur:
        event_.has_dur = is_number && ParseTimeNs(text, &event_.dur_ns, /*micros=*/true);
        break;
      case Field::kPid:
        event_.pid = ThreadPart(text, is_number);
        break;
      case Field::kTid:
        event_.tid = ThreadPart(text, is_number);
        break;
      case Field::kAddr:
        event_.has_addr = is_number && ParseAddress(text, &event_.memory.address);
        break;
      case Field::kBytes:
        event_.has_bytes = is_number && ParseByteCount(text, &event_.memory.bytes);
        break;
      case Field::kTotalAllocated:
        if (!(is_number && ParseByteCount(text, &event_.memory.total_allocated))) {
          MarkMalformed(field);
        }
        break;
      case Field::kTotalReserved:
        if (!(is_number && ParseByteCount(text, &event_.memory.total_reserved))) {
          MarkMalformed(field);
        }
        break;
      case Field::kDeviceType:
        if (!(is_number && ParseDeviceField(text, &event_.memory.device_type))) {
          MarkMalformed(field);
        }
        break;
      case Field::kDeviceId:
        if (!(is_number && ParseDeviceField(text, &event_.memory.device_id))) MarkMalformed(field);
        break;
      case Field::kEvIdx:
        if (!(is_number && ParseInt64(text, &event_.memory.ev_idx))) MarkMalformed(field);
        break;
      case Field::kRank:
        if (is_number && ParseInt64(text, &value)) trace_->distributed.rank = value;
        break;
      case Field::kWorldSize:
        if (is_number && ParseInt64(text, &value)) trace_->distributed.world_size = value;
        break;
      case Field::kBackend:
        trace_->distributed.backend.assign(text.data(), text.size());
        break;
      case Field::kId:
        if (is_number && ParseInt64(text, &value)) device_id_ = value;
        break;
      case Field::kTotalGlobalMem:
        if (is_number && ParseInt64(text, &value)) device_total_ = value;
        break;
      default:
        break;
    }
    return true;
  }

  void FinishEvent() {
    KinetoParseCounts& counts = trace_->counts;
    ++counts.trace_events;
    const PendingEvent& e = event_;
    if (e.name == kMemoryEventName && (e.ph == "i" || e.ph == "I")) {
      if (!e.has_addr || !e.has_bytes || !e.has_ts || e.malformed_arg) {
        ++counts.memory_skipped;
        return;
      }
      KinetoMemoryRecord record = e.memory;
      record.ts_ns = e.ts_ns;
      record.thread = ThreadKey(e.pid, e.tid);
      if (!trace_->first_pid.has_value() && (e.pid >> 63) == 0) {
        trace_->first_pid = static_cast<int64_t>(e.pid);
      }
      trace_->memory.push_back(record);
      ++counts.memory_events;
      counts.memory_args_unread += e.unread_arg;
      return;
    }
    if (e.ph != "X" || !e.has_ts || !e.has_dur) return;
    KinetoRange range{e.ts_ns, e.ts_ns + (e.dur_ns > 0 ? e.dur_ns : 0), ThreadKey(e.pid, e.tid), 0};
    if (absl::StartsWith(e.name, kStepPrefix)) {
      int64_t step = 0;
      if (absl::SimpleAtoi(absl::string_view(e.name).substr(kStepPrefix.size()), &step)) {
        trace_->steps.push_back({range, step, e.cat == "gpu_user_annotation"});
        ++counts.step_ranges;
        return;
      }
    }
    // record_function scopes, and with_modules=True module scopes ("nn.Module: Linear_3").
    const bool module_scope =
        module_tags_ && e.cat == "python_function" && absl::StartsWith(e.name, kModulePrefix);
    if (e.cat == "user_annotation" || module_scope) {
      auto [it, inserted] = name_ids_.try_emplace(e.name, trace_->names.size());
      if (inserted) trace_->names.push_back(e.name);
      range.name = it->second;
      trace_->annotations.push_back(range);
      ++(module_scope ? counts.module_ranges : counts.annotation_ranges);
    }
  }

  void FinishDevice() {
    if (device_id_ < 0 || device_id_ > 4096) return;
    auto& totals = trace_->device_total_bytes;
    if (totals.size() <= static_cast<size_t>(device_id_)) totals.resize(device_id_ + 1, 0);
    totals[device_id_] = device_total_ > 0 ? static_cast<uint64_t>(device_total_) : 0;
  }

  KinetoTrace* trace_;
  bool module_tags_;
  std::vector<Context> stack_;
  const bool header_only_;
  int skip_depth_ = 0;
  Field field_ = Field::kNone;
  bool saw_trace_events_ = false;
  PendingEvent event_;
  absl::flat_hash_map<std::string, uint32_t> name_ids_;
  int64_t device_id_ = -1;
  int64_t device_total_ = 0;
};

// `header_only`: stops where the trace events begin (see KinetoHandler), keeping what came before.
template <typename Stream>
absl::StatusOr<KinetoTrace> Parse(Stream& stream, absl::string_view name, bool compressed,
                                  const absl::Status* read_status, bool module_tags,
                                  bool header_only = false) {
  KinetoTrace trace;
  KinetoHandler handler(&trace, module_tags, header_only);
  rapidjson::Reader reader;
  rapidjson::ParseResult result = reader.Parse<kParseFlags>(stream, handler);
  if (read_status != nullptr && !read_status->ok()) {
    // The JSON error that follows a truncated .gz is a symptom; report the cause.
    return absl::DataLossError(absl::StrCat(read_status->message(), " (JSON read up to byte ",
                                            stream.Tell(), " of the decompressed data)"));
  }
  const bool stopped_at_events = header_only && handler.saw_trace_events() &&
                                 result.Code() == rapidjson::kParseErrorTermination;
  if (result.IsError() && !stopped_at_events) {
    // The parser stops where it failed: at the end of the data, the file was cut short (a job
    // killed while the profiler wrote it), which "Missing a comma" alone did not say.
    const bool at_end = stream.Peek() == '\0';
    return absl::DataLossError(
        absl::StrCat(name, ": malformed JSON at byte ", result.Offset(),
                     compressed ? " of the decompressed data" : "", ": ",
                     rapidjson::GetParseError_En(result.Code()),
                     at_end ? " (the data ends there: a truncated file?)" : ""));
  }
  // A bad file, as malformed JSON is (exit code 1), not a bad command line (INVALID_ARGUMENT: 2).
  if (!handler.saw_trace_events()) {
    return absl::DataLossError(absl::StrCat(name, ": not a Chrome trace: no traceEvents array"));
  }
  return trace;
}

// What comes before the trace events: the top-level object up to its traceEvents array (or the
// whole file, when it has none), for its distributedInfo.
template <typename Stream>
absl::StatusOr<KinetoDistributedInfo> ParseHeader(Stream& stream, absl::string_view name,
                                                  bool compressed,
                                                  const absl::Status* read_status) {
  absl::StatusOr<KinetoTrace> header = Parse(stream, name, compressed, read_status,
                                             /*module_tags=*/false, /*header_only=*/true);
  if (!header.ok()) return header.status();
  return header->distributed;
}

}  // namespace

bool ParseMicrosToNanos(absl::string_view text, int64_t* nanos) {
  if (text.empty()) return false;
  if (text.find_first_of("eE") != absl::string_view::npos) {
    double d = 0;
    if (!absl::SimpleAtod(text, &d) || !std::isfinite(d) || std::fabs(d) > 9.2e15) return false;
    *nanos = std::llround(d * 1000.0);
    return true;
  }
  bool negative = text.front() == '-';
  if (negative || text.front() == '+') text.remove_prefix(1);
  size_t dot = text.find('.');
  absl::string_view whole = text.substr(0, dot);
  absl::string_view fraction = dot == absl::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return false;
  uint64_t micros = 0;
  if (!whole.empty()) {
    auto [ptr, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), micros);
    if (ec != std::errc() || ptr != whole.data() + whole.size()) return false;
  }
  if (micros > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1000 - 1)) {
    return false;
  }
  int64_t sub = 0;  // nanoseconds from the first three fractional digits
  for (size_t i = 0; i < fraction.size(); ++i) {
    char c = fraction[i];
    if (c < '0' || c > '9') return false;
    if (i < 3) {
      sub = sub * 10 + (c - '0');
    } else if (i == 3 && c >= '5') {
      sub += 1;  // round half up on the fourth digit
    }
  }
  for (size_t i = fraction.size(); i < 3; ++i) sub *= 10;
  int64_t value = static_cast<int64_t>(micros) * 1000 + sub;
  *nanos = negative ? -value : value;
  return true;
}

absl::StatusOr<KinetoTrace> ParseKinetoFile(const std::string& path,
                                            const KinetoParseOptions& options) {
  absl::StatusOr<std::unique_ptr<CompressedInput>> input = CompressedInput::Open(path);
  if (!input.ok()) return input.status();
  if (options.progress) (*input)->set_progress(options.progress);
  return Parse(**input, path, (*input)->compressed(), &(*input)->read_status(),
               options.module_tags);
}

absl::StatusOr<KinetoDistributedInfo> ReadKinetoHeader(const std::string& path) {
  absl::StatusOr<std::unique_ptr<CompressedInput>> input = CompressedInput::Open(path);
  if (!input.ok()) return input.status();
  return ParseHeader(**input, path, (*input)->compressed(), &(*input)->read_status());
}

absl::StatusOr<KinetoDistributedInfo> ReadKinetoJsonHeader(absl::string_view json,
                                                           absl::string_view name) {
  rapidjson::MemoryStream stream(json.data(), json.size());
  return ParseHeader(stream, name, false, nullptr);
}

absl::StatusOr<KinetoTrace> ParseKinetoJson(absl::string_view json, absl::string_view name,
                                            const KinetoParseOptions& options) {
  rapidjson::MemoryStream stream(json.data(), json.size());
  return Parse(stream, name, false, nullptr, options.module_tags);
}

}  // namespace memtrace::importers
