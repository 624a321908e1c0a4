// Prints what a collector stored, one line per job or rank, for the launcher tests' shell
// scripts (the `memtrace ranks` table does not show every identity field, e.g. group_rank).
//
//   collector_view ADDR jobs         -> "job=J ranks=N events=E"
//   collector_view ADDR ranks JOB    -> "rank=R local_rank=L world_size=W group_rank=G
//                                        attempt=A launcher=X identified_by=Y events=E
//                                        complete=0|1 started_the_rank=0|1
//                                        subprocess_of=R|-"  (sorted by rank)
// Exit code 1 with the error on stderr when the collector cannot answer.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "query/cli/query_client.h"

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[2]) == "ranks" && argc < 4)) {
    fprintf(stderr, "usage: collector_view ADDR jobs | collector_view ADDR ranks JOB\n");
    return 64;
  }
  absl::StatusOr<memtrace::cli::QueryClient> client =
      memtrace::cli::QueryClient::Create(argv[1], absl::Seconds(5));
  if (!client.ok()) {
    fprintf(stderr, "%s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> lines;
  if (std::string(argv[2]) == "jobs") {
    absl::StatusOr<memtrace::v1::ListJobsResponse> jobs = client->ListJobs();
    if (!jobs.ok()) {
      fprintf(stderr, "%s\n", std::string(jobs.status().message()).c_str());
      return 1;
    }
    for (const auto& job : jobs->jobs()) {
      lines.push_back(
          absl::StrCat("job=", job.job_id(), " ranks=", job.ranks(), " events=", job.events()));
    }
  } else {
    absl::StatusOr<memtrace::v1::ListRanksResponse> ranks = client->ListRanks(argv[3]);
    if (!ranks.ok()) {
      fprintf(stderr, "%s\n", std::string(ranks.status().message()).c_str());
      return 1;
    }
    std::vector<memtrace::v1::RankSummary> sorted(ranks->ranks().begin(), ranks->ranks().end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
    for (const auto& r : sorted) {
      const auto& id = r.identity();
      lines.push_back(absl::StrCat(
          "rank=", r.rank(), " local_rank=", id.local_rank(), " world_size=", id.world_size(),
          " group_rank=", id.group_rank(), " attempt=", id.attempt(), " launcher=", id.launcher(),
          " identified_by=", r.identified_by(), " events=", r.events_stored(),
          " complete=", r.complete() ? 1 : 0, " started_the_rank=", id.started_the_rank() ? 1 : 0,
          " subprocess_of=",
          id.has_subprocess_of_rank() ? absl::StrCat(id.subprocess_of_rank()) : "-"));
    }
  }
  for (const std::string& line : lines) printf("%s\n", line.c_str());
  return 0;
}
