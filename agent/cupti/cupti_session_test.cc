// CuptiSession against the real libcupti on a machine without a GPU or driver: starting must
// degrade (no subscriber, no activity kinds) without failing, and the buffer path the driver
// would drive (request -> complete) must hand our records to the handlers and refuse foreign
// buffers.
#include "agent/cupti/cupti_session.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace memtrace {
namespace cupti {
namespace {

class RecordingHandlers : public CuptiHandlers {
 public:
  void OnApi(const ApiCall&) override { ++api_calls; }
  void OnNvtx(CUpti_CallbackId, const void*, const void*) override { ++nvtx_calls; }
  void OnActivityBuffer(uint8_t* buffer, size_t valid_size) override {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      kinds.push_back(record->kind);
    }
  }
  void OnRecordsDropped(uint64_t n) override { dropped += n; }

  int api_calls = 0;
  int nvtx_calls = 0;
  uint64_t dropped = 0;
  std::vector<CUpti_ActivityKind> kinds;
};

std::string ReadAll(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(CuptiSessionTest, WithoutDriverStartDegradesAndBufferPathStillWorks) {
  std::FILE* logfile = std::tmpfile();
  ASSERT_NE(logfile, nullptr);
  AgentLog log(logfile);
  RecordingHandlers handlers;
  CuptiSessionOptions options;
  options.buffer_bytes = 4096;
  options.max_buffers = 2;
  std::unique_ptr<CuptiSession> session = CuptiSession::Start(options, &handlers, &log);
  ASSERT_NE(session, nullptr);
  EXPECT_GE(session->state().version, 130000u);  // cuptiGetVersion needs no GPU
  EXPECT_FALSE(session->state().callbacks);
  EXPECT_FALSE(session->state().records);
  const std::string logged = ReadAll(logfile);
  EXPECT_NE(logged.find("memtrace-agent: cuptiSubscribe_v2 failed"), std::string::npos) << logged;

  // CUPTI asks for buffers: two are handed out, the third request is declined.
  uint8_t* b1 = nullptr;
  uint8_t* b2 = nullptr;
  uint8_t* b3 = reinterpret_cast<uint8_t*>(1);
  size_t size = 0, max_records = 7;
  session->HandleBufferRequest(&b1, &size, &max_records);
  EXPECT_NE(b1, nullptr);
  EXPECT_EQ(size, 4096u);
  EXPECT_EQ(max_records, 0u);
  session->HandleBufferRequest(&b2, &size, &max_records);
  EXPECT_NE(b2, nullptr);
  size = 99;
  b3 = nullptr;
  session->HandleBufferRequest(&b3, &size, &max_records);
  EXPECT_EQ(b3, nullptr);

  // The driver fills b1 with two records and completes it.
  CUpti_ActivityMemory4 alloc;
  std::memset(&alloc, 0, sizeof alloc);
  alloc.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  CUpti_ActivityMemoryPool3 pool;
  std::memset(&pool, 0, sizeof pool);
  pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  std::memcpy(b1, &alloc, sizeof alloc);
  std::memcpy(b1 + sizeof alloc, &pool, sizeof pool);
  session->HandleBufferComplete(b1, 4096, sizeof alloc + sizeof pool);
  ASSERT_EQ(handlers.kinds.size(), 2u);
  EXPECT_EQ(handlers.kinds[0], CUPTI_ACTIVITY_KIND_MEMORY2);
  EXPECT_EQ(handlers.kinds[1], CUPTI_ACTIVITY_KIND_MEMORY_POOL);

  // b1 went back to the pool: the next request gets a buffer again.
  session->HandleBufferRequest(&b3, &size, &max_records);
  EXPECT_EQ(b3, b1);

  // A buffer some other CUPTI client allocated is neither read nor freed.
  alignas(8) uint8_t foreign[256];
  std::memcpy(foreign, &alloc, sizeof alloc);
  session->HandleBufferComplete(foreign, sizeof foreign, sizeof alloc);
  EXPECT_EQ(handlers.kinds.size(), 2u);
  EXPECT_NE(ReadAll(logfile).find("did not allocate"), std::string::npos);

  // An empty completion only returns the buffer.
  session->HandleBufferComplete(b2, 4096, 0);
  EXPECT_EQ(handlers.kinds.size(), 2u);

  // Callbacks after Stop() are not delivered.
  session->Stop();
  CUpti_CallbackData data;
  std::memset(&data, 0, sizeof data);
  session->HandleCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &data);
  EXPECT_EQ(handlers.api_calls, 0);
  std::fclose(logfile);
}

TEST(CuptiSessionTest, CallbacksAreRoutedByDomain) {
  AgentLog log(std::tmpfile());
  RecordingHandlers handlers;
  CuptiSessionOptions options;
  options.subscribe = false;
  std::unique_ptr<CuptiSession> session = CuptiSession::Start(options, &handlers, &log);
  CUpti_CallbackData api;
  std::memset(&api, 0, sizeof api);
  api.callbackSite = CUPTI_API_ENTER;
  session->HandleCallback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &api);
  session->HandleCallback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
                          &api);
  CUpti_NvtxData nvtx;
  std::memset(&nvtx, 0, sizeof nvtx);
  session->HandleCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop, &nvtx);
  session->HandleCallback(CUPTI_CB_DOMAIN_DRIVER_API, 1, nullptr);  // no data: ignored
  EXPECT_EQ(handlers.api_calls, 2);
  EXPECT_EQ(handlers.nvtx_calls, 1);
}

TEST(CuptiSessionTest, FindsTheLinkedLibcupti) {
  std::vector<std::string> libs = LoadedCuptiLibraries();
  ASSERT_EQ(libs.size(), 1u);
  EXPECT_NE(libs[0].find("libcupti.so.13"), std::string::npos) << libs[0];
}

TEST(CuptiSessionTest, ResultNamesAreReadable) {
  EXPECT_EQ(CuptiResultName(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)");
}

}  // namespace
}  // namespace cupti
}  // namespace memtrace
