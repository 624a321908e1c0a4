#include "collector/store/key_codec.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace memtrace::collector {

namespace {

uint32_t ReadU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

uint64_t ReadU64(const char* p) {
  return (uint64_t{ReadU32(p)} << 32) | uint64_t{ReadU32(p + 4)};
}

StreamKey ReadStream(const char* p) { return StreamKey{ReadU32(p), ReadU32(p + 4), ReadU32(p + 8)}; }

absl::Status WrongLength(const char* what, absl::string_view key, size_t want) {
  return absl::InvalidArgumentError(absl::StrCat(what, " key has ", key.size(), " bytes, want ",
                                                 want, ": ", absl::CHexEscape(key)));
}

absl::Status CheckMeta(const char* what, absl::string_view key, MetaTag tag, size_t want) {
  if (key.size() != want) return WrongLength(what, key, want);
  if (static_cast<uint8_t>(key[0]) != static_cast<uint8_t>(tag)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " key starts with tag ", static_cast<int>(static_cast<uint8_t>(key[0])),
                     ", want '", std::string(1, static_cast<char>(tag)), "'"));
  }
  return absl::OkStatus();
}

constexpr uint64_t kSignFlip = uint64_t{1} << 63;

}  // namespace

void PutU32(std::string* out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out->append(b, 4);
}

void PutU64(std::string* out, uint64_t v) {
  PutU32(out, static_cast<uint32_t>(v >> 32));
  PutU32(out, static_cast<uint32_t>(v));
}

void PutOrderedI64(std::string* out, int64_t v) { PutU64(out, static_cast<uint64_t>(v) ^ kSignFlip); }

absl::StatusOr<uint32_t> DecodeU32(absl::string_view bytes) {
  if (bytes.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("u32 has ", bytes.size(), " bytes, want 4"));
  }
  return ReadU32(bytes.data());
}

absl::StatusOr<uint64_t> DecodeU64(absl::string_view bytes) {
  if (bytes.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat("u64 has ", bytes.size(), " bytes, want 8"));
  }
  return ReadU64(bytes.data());
}

absl::StatusOr<int64_t> DecodeOrderedI64(absl::string_view bytes) {
  absl::StatusOr<uint64_t> u = DecodeU64(bytes);
  if (!u.ok()) return u.status();
  return static_cast<int64_t>(*u ^ kSignFlip);
}

std::string JobPrefix(uint32_t job_no) {
  std::string out;
  PutU32(&out, job_no);
  return out;
}

std::string StreamPrefix(const StreamKey& stream) {
  std::string out;
  out.reserve(kBlockKeyBytes + 1);
  PutU32(&out, stream.job_no);
  PutU32(&out, stream.rank);
  PutU32(&out, stream.attempt);
  return out;
}

std::string BlockKey(const StreamKey& stream, uint64_t first_seq) {
  std::string out = StreamPrefix(stream);
  PutU64(&out, first_seq);
  return out;
}

absl::StatusOr<BlockKeyParts> DecodeBlockKey(absl::string_view key) {
  if (key.size() != kBlockKeyBytes) return WrongLength("block", key, kBlockKeyBytes);
  return BlockKeyParts{ReadStream(key.data()), ReadU64(key.data() + kStreamKeyBytes)};
}

std::string RollupPrefix(const StreamKey& stream, RollupAxis axis) {
  std::string out = StreamPrefix(stream);
  out.push_back(static_cast<char>(axis));
  return out;
}

std::string RollupKey(const StreamKey& stream, RollupAxis axis, int64_t key) {
  std::string out = RollupPrefix(stream, axis);
  PutOrderedI64(&out, key);
  return out;
}

absl::StatusOr<RollupKeyParts> DecodeRollupKey(absl::string_view key) {
  if (key.size() != kRollupKeyBytes) return WrongLength("rollup", key, kRollupKeyBytes);
  const uint8_t axis = static_cast<uint8_t>(key[kStreamKeyBytes]);
  if (axis > static_cast<uint8_t>(RollupAxis::kTime)) {
    return absl::InvalidArgumentError(absl::StrCat("rollup key has unknown axis ", axis));
  }
  return RollupKeyParts{ReadStream(key.data()), static_cast<RollupAxis>(axis),
                        static_cast<int64_t>(ReadU64(key.data() + kStreamKeyBytes + 1) ^ kSignFlip)};
}

std::string CheckpointKey(const StreamKey& stream, uint64_t seq) { return BlockKey(stream, seq); }

absl::StatusOr<CheckpointKeyParts> DecodeCheckpointKey(absl::string_view key) {
  if (key.size() != kCheckpointKeyBytes) return WrongLength("checkpoint", key, kCheckpointKeyBytes);
  return CheckpointKeyParts{ReadStream(key.data()), ReadU64(key.data() + kStreamKeyBytes)};
}

std::string JobMetaKey(absl::string_view job_id) {
  std::string out(1, static_cast<char>(MetaTag::kJob));
  out.append(job_id.data(), job_id.size());
  return out;
}

absl::StatusOr<std::string> DecodeJobMetaKey(absl::string_view key) {
  if (key.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("job meta key has ", key.size(), " bytes, want a tag and a non-empty name"));
  }
  if (key[0] != static_cast<char>(MetaTag::kJob)) {
    return absl::InvalidArgumentError(absl::StrCat("job meta key has tag ", static_cast<int>(key[0])));
  }
  return std::string(key.substr(1));
}

std::string StreamMetaPrefix(uint32_t job_no) {
  std::string out(1, static_cast<char>(MetaTag::kStream));
  PutU32(&out, job_no);
  return out;
}

std::string StreamMetaPrefix(uint32_t job_no, uint32_t rank) {
  std::string out = StreamMetaPrefix(job_no);
  PutU32(&out, rank);
  return out;
}

std::string StreamMetaKey(const StreamKey& stream) {
  std::string out(1, static_cast<char>(MetaTag::kStream));
  out += StreamPrefix(stream);
  return out;
}

absl::StatusOr<StreamKey> DecodeStreamMetaKey(absl::string_view key) {
  absl::Status s = CheckMeta("stream meta", key, MetaTag::kStream, 1 + kStreamKeyBytes);
  if (!s.ok()) return s;
  return ReadStream(key.data() + 1);
}

std::string StringMetaPrefix(const StreamKey& stream) {
  std::string out(1, static_cast<char>(MetaTag::kString));
  out += StreamPrefix(stream);
  return out;
}

std::string StringMetaKey(const StreamKey& stream, uint32_t string_id) {
  std::string out = StringMetaPrefix(stream);
  PutU32(&out, string_id);
  return out;
}

absl::StatusOr<StringMetaKeyParts> DecodeStringMetaKey(absl::string_view key) {
  absl::Status s = CheckMeta("string meta", key, MetaTag::kString, 1 + kStreamKeyBytes + 4);
  if (!s.ok()) return s;
  return StringMetaKeyParts{ReadStream(key.data() + 1), ReadU32(key.data() + 1 + kStreamKeyBytes)};
}

std::string SyntheticRankKey(uint32_t job_no, absl::string_view host, int32_t device,
                             uint32_t pid, uint64_t start_ns) {
  std::string out(1, static_cast<char>(start_ns != 0 ? MetaTag::kSyntheticStarted
                                                     : MetaTag::kSynthetic));
  PutU32(&out, job_no);
  PutU32(&out, static_cast<uint32_t>(device));
  PutU32(&out, pid);
  if (start_ns != 0) PutU64(&out, start_ns);
  // Host last: it is the only variable-length part, so no separator is needed.
  out.append(host.data(), host.size());
  return out;
}

std::string CheckpointTsPrefix(const StreamKey& stream) {
  std::string out(1, static_cast<char>(MetaTag::kCheckpointTs));
  out += StreamPrefix(stream);
  return out;
}

std::string CheckpointTsKey(const StreamKey& stream, uint64_t seq) {
  std::string out = CheckpointTsPrefix(stream);
  PutU64(&out, seq);
  return out;
}

absl::StatusOr<CheckpointKeyParts> DecodeCheckpointTsKey(absl::string_view key) {
  absl::Status s = CheckMeta("checkpoint ts", key, MetaTag::kCheckpointTs, 1 + kCheckpointKeyBytes);
  if (!s.ok()) return s;
  return CheckpointKeyParts{ReadStream(key.data() + 1), ReadU64(key.data() + 1 + kStreamKeyBytes)};
}

}  // namespace memtrace::collector
