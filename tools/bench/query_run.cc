#include "tools/bench/query_run.h"

#include <algorithm>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collector/server/analysis_loader.h"
#include "collector/server/collector_server.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/memtrace/v1/analysis.grpc.pb.h"
#include "proto/memtrace/v1/query.grpc.pb.h"
#include "query/analysis/diverged.h"
#include "query/analysis/growth.h"
#include "query/analysis/leaks.h"
#include "query/analysis/live.h"
#include "query/analysis/rollup_convert.h"

namespace memtrace::bench {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// One client of one collector, asking what the `memtrace` CLI asks: the Analysis service, which
// reads the rollups (or live sets) in the collector and answers with a report.
class Asker {
 public:
  Asker(const std::string& address, const QueryPlan& plan) : plan_(plan) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(1 << 30);
    stub_ = v1::Analysis::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  // Answers `q` once; `bytes` gets the wire size of the report.
  absl::StatusOr<std::string> Ask(Question q, uint64_t* bytes) {
    *bytes = 0;
    grpc::ClientContext ctx;
    switch (q) {
      case Question::kDiverged: {
        v1::DivergedRequest req;
        req.set_job_id(plan_.job_id);
        v1::DivergenceReport r;
        if (absl::Status s = FromGrpc(stub_->Diverged(&ctx, req, &r), "Diverged"); !s.ok()) {
          return s;
        }
        *bytes = r.ByteSizeLong();
        if (r.diverged().empty()) return std::string("none diverged");
        return absl::StrCat("rank ", r.diverged(0).rank(), " from step ", r.diverged(0).onset_step(),
                            r.diverged_size() > 1
                                ? absl::StrCat(" (+", r.diverged_size() - 1, " more)")
                                : "");
      }
      case Question::kGrowth: {
        v1::GrowthRequest req;
        req.set_job_id(plan_.job_id);
        v1::GrowthReport r;
        if (absl::Status s = FromGrpc(stub_->Growth(&ctx, req, &r), "Growth"); !s.ok()) return s;
        *bytes = r.ByteSizeLong();
        if (r.groups().empty()) return std::string("nothing grows");
        const v1::GroupGrowth& g = r.groups(0);
        return absl::StrCat("tag ", g.name(), " on ", g.ranks_growing(), " rank(s), ",
                            static_cast<int64_t>(g.total_bytes_per_step() / (1 << 20)),
                            " MiB/step");
      }
      case Question::kLeaks: {
        v1::LeaksRequest req;
        req.set_job_id(plan_.job_id);
        v1::LeakReport r;
        if (absl::Status s = FromGrpc(stub_->Leaks(&ctx, req, &r), "Leaks"); !s.ok()) return s;
        *bytes = r.ByteSizeLong();
        std::vector<uint32_t> leaking;
        for (const v1::RankCurve& c : r.curves()) {
          if (c.curve() == v1::CURVE_CLASS_LEAK) leaking.push_back(c.rank());
        }
        if (leaking.empty()) return std::string("no leaking rank");
        std::string top = r.candidates().empty() ? "" : absl::StrCat(", top candidate ",
                                                                      r.candidates(0).tag());
        return absl::StrCat("leaking rank(s) ", absl::StrJoin(leaking, ","), top);
      }
      case Question::kLive: {
        v1::LiveRequest req;
        req.set_job_id(plan_.job_id);
        req.set_rank(plan_.live_rank);
        req.set_at_ns(plan_.live_at_ns);
        v1::LiveReport r;
        if (absl::Status s = FromGrpc(stub_->Live(&ctx, req, &r), "Live"); !s.ok()) return s;
        *bytes = r.ByteSizeLong();
        if (r.groups().empty()) return std::string("nothing live");
        return absl::StrCat("top tag ", r.groups(0).tag(), " ", r.groups(0).bytes() >> 20,
                            " MiB of ", r.total_bytes() >> 20, " MiB live, next to ",
                            r.other_ranks(), " other ranks");
      }
    }
    return absl::InternalError("unknown question");
  }

 private:
  const QueryPlan& plan_;
  std::unique_ptr<v1::Analysis::Stub> stub_;
};

// Times the three in-process parts of a rollup question (see QuestionTiming).
absl::Status Breakdown(collector::CollectorServer& server, const QueryPlan& plan, Question q,
                       QuestionTiming* t) {
  // What the Analysis service reads for each question (diverged: its columns from the series;
  // the others: the rows).
  absl::Time s = absl::Now();
  if (q == Question::kDiverged) {
    absl::StatusOr<analysis::JobStepMetrics> columns =
        collector::LoadJobStepMetrics(server.store(), plan.job_id, v1::TIMELINE_AXIS_STEP);
    if (!columns.ok()) return columns.status();
    t->load_ms = Ms(absl::Now() - s);
    s = absl::Now();
    (void)analysis::FindDivergence(*columns);
    t->analysis_ms = Ms(absl::Now() - s);
    return absl::OkStatus();
  }
  absl::StatusOr<analysis::JobTimeline> job = collector::LoadJobTimeline(
      server.store(), plan.job_id, v1::TIMELINE_AXIS_STEP, collector::RollupDetail::kFull);
  if (!job.ok()) return job.status();
  t->load_ms = Ms(absl::Now() - s);
  s = absl::Now();
  switch (q) {
    case Question::kDiverged:
      break;
    case Question::kGrowth:
      (void)analysis::FindGrowth(*job);
      break;
    case Question::kLeaks:
      (void)analysis::FindLeaks(*job);
      break;
    case Question::kLive:
      break;
  }
  t->analysis_ms = Ms(absl::Now() - s);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<collector::CollectorServer>> Serve(const std::string& dir) {
  collector::CollectorServerOptions o;
  o.listen = "127.0.0.1:0";
  o.store.dir = dir;
  return collector::CollectorServer::Start(o);
}

}  // namespace

const char* QuestionName(Question q) {
  switch (q) {
    case Question::kDiverged:
      return "diverged";
    case Question::kGrowth:
      return "growth";
    case Question::kLeaks:
      return "leaks";
    case Question::kLive:
      return "live";
  }
  return "?";
}

absl::StatusOr<std::vector<QuestionTiming>> TimeQuestions(const QueryPlan& plan) {
  std::vector<QuestionTiming> out;
  for (Question q : kAllQuestions) {
    QuestionTiming t;
    t.question = q;
    const absl::Time open_start = absl::Now();
    absl::StatusOr<std::unique_ptr<collector::CollectorServer>> server = Serve(plan.data_dir);
    if (!server.ok()) return server.status();
    t.open_ms = Ms(absl::Now() - open_start);
    {
      Asker asker((*server)->address(), plan);
      const absl::Time cold_start = absl::Now();
      absl::StatusOr<std::string> answer = asker.Ask(q, &t.response_bytes);
      t.cold_ms = Ms(absl::Now() - cold_start);
      if (!answer.ok()) {
        return absl::Status(answer.status().code(),
                            absl::StrCat(QuestionName(q), " on job ", plan.job_id, ": ",
                                         answer.status().message()));
      }
      t.answer = *answer;
      std::vector<double> warm;
      for (int i = 0; i < std::max(1, plan.warm_repeats); ++i) {
        uint64_t bytes = 0;
        const absl::Time s = absl::Now();
        absl::StatusOr<std::string> again = asker.Ask(q, &bytes);
        warm.push_back(Ms(absl::Now() - s));
        if (!again.ok()) return again.status();
      }
      std::sort(warm.begin(), warm.end());
      t.warm_ms = warm[warm.size() / 2];
      if (q != Question::kLive) {
        if (absl::Status b = Breakdown(**server, plan, q, &t); !b.ok()) return b;
      }
    }
    (*server)->Shutdown();
    out.push_back(t);
  }
  return out;
}

absl::StatusOr<int64_t> StepStartNs(const std::string& data_dir, const std::string& job_id,
                                    uint32_t rank, int64_t step) {
  collector::EventStoreOptions o;
  o.dir = data_dir;
  absl::StatusOr<std::unique_ptr<collector::EventStore>> store = collector::EventStore::Open(o);
  if (!store.ok()) return store.status();
  absl::StatusOr<v1::GetRollupsResponse> rollups =
      (*store)->Rollups(job_id, collector::RollupAxis::kStep);
  if (!rollups.ok()) return rollups.status();
  for (const v1::RankRollups& r : rollups->ranks()) {
    if (r.rank() != rank) continue;
    for (const v1::StepRollup& s : r.steps()) {
      if (s.step() == step) return s.start_ns();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("job ", job_id, " has no step ", step, " on rank ", rank));
}

}  // namespace memtrace::bench
