#include "tools/bench/sql_baseline.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "collector/store/event_store.h"
#include "query/cli/text_escape.h"
#include "tools/bench/proc_stats.h"

namespace memtrace::bench {
namespace {

constexpr uint32_t kPage = 1 << 20;
constexpr const char* kEventColumns =
    "{'rank':'INTEGER','seq':'BIGINT','ts':'BIGINT','kind':'TINYINT','address':'BIGINT',"
    "'bytes':'BIGINT','tag':'INTEGER'}";
constexpr const char* kStringColumns =
    "{'rank':'INTEGER','id':'INTEGER','kind':'TINYINT','value':'VARCHAR'}";

// Buffered writing of one CSV file.
class CsvFile {
 public:
  explicit CsvFile(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {}
  ~CsvFile() { (void)Close(); }
  bool ok() const { return file_ != nullptr; }
  std::string& buffer() { return buf_; }
  void MaybeFlush() {
    if (buf_.size() >= (4 << 20)) Flush();
  }
  bool Close() {
    if (file_ == nullptr) return false;
    Flush();
    const bool ok = std::fclose(file_) == 0 && !failed_;
    file_ = nullptr;
    return ok;
  }

 private:
  void Flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) {
      failed_ = true;
    }
    bytes_ += buf_.size();
    buf_.clear();
  }
  std::FILE* file_;
  std::string buf_;
  uint64_t bytes_ = 0;
  bool failed_ = false;
};

// Always quoted, unlike cli::CsvField: the baseline's CSV stays as the recorded figures read it
// (the queries coalesce a NULL value to '' either way).
std::string CsvQuote(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

std::string RankList(const SqlParams& p) {
  std::vector<uint32_t> ranks = {p.live_rank};
  ranks.insert(ranks.end(), p.other_ranks.begin(), p.other_ranks.end());
  return absl::StrJoin(ranks, ", ");
}

// Live bytes and step of every event, per rank in seq order. `greatest`/`max` differ by engine.
std::string EventsWithLiveAndStep(const char* greatest) {
  return absl::StrCat(
      "ev AS (\n"
      "  SELECT rank, seq, kind, address, bytes, tag,\n"
      "    sum(CASE kind WHEN 1 THEN bytes WHEN 2 THEN -bytes ELSE 0 END) OVER w AS live,\n"
      "    ",
      greatest,
      "(sum(CASE WHEN kind = 9 THEN 1 ELSE 0 END) OVER w - 1, 0) AS step\n"
      "  FROM events\n"
      "  WINDOW w AS (PARTITION BY rank ORDER BY seq ROWS UNBOUNDED PRECEDING)),\n"
      "floors AS (SELECT rank, step, min(live) AS floor FROM ev GROUP BY rank, step)");
}

}  // namespace

absl::StatusOr<CsvExport> ExportJobCsv(const std::string& data_dir, const std::string& job_id,
                                       const std::string& out_dir) {
  const absl::Time start = absl::Now();
  collector::EventStoreOptions o;
  o.dir = data_dir;
  absl::StatusOr<std::unique_ptr<collector::EventStore>> store = collector::EventStore::Open(o);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::vector<v1::RankSummary>> ranks = (*store)->ListRanks(job_id);
  if (!ranks.ok()) return ranks.status();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  CsvExport out;
  out.events_csv = absl::StrCat(out_dir, "/", job_id, ".events.csv");
  out.strings_csv = absl::StrCat(out_dir, "/", job_id, ".strings.csv");
  CsvFile events(out.events_csv), strings(out.strings_csv);
  if (!events.ok() || !strings.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot write CSV files in ", out_dir));
  }
  absl::StrAppend(&events.buffer(), "rank,seq,ts,kind,address,bytes,tag\n");
  absl::StrAppend(&strings.buffer(), "rank,id,kind,value\n");
  for (const v1::RankSummary& r : *ranks) {
    uint64_t from = 1;
    bool first = true;
    while (from != 0) {
      absl::StatusOr<collector::StoredEvents> page =
          (*store)->ReadEvents(job_id, r.rank(), r.identity().attempt(), from, kPage);
      if (!page.ok()) return page.status();
      if (first) {
        for (const StringDef& d : page->strings) {
          absl::StrAppend(&strings.buffer(), r.rank(), ",", d.id, ",", static_cast<int>(d.kind),
                          ",", CsvQuote(d.value), "\n");
        }
        first = false;
      }
      std::string& b = events.buffer();
      for (const Event& e : page->events) {
        absl::StrAppend(&b, r.rank(), ",", e.seq, ",", e.ts_ns, ",", static_cast<int>(e.kind), ",",
                        e.address, ",", e.bytes, ",", e.tag_id, "\n");
        events.MaybeFlush();
      }
      out.rows += page->events.size();
      from = page->next_seq;
    }
  }
  if (!events.Close() || !strings.Close()) {
    return absl::DataLossError(absl::StrCat("writing CSV files in ", out_dir, " failed"));
  }
  out.bytes = std::filesystem::file_size(out.events_csv, ec) +
              std::filesystem::file_size(out.strings_csv, ec);
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

std::vector<SqlQuestion> DuckDbQuestions(const SqlParams& p) {
  const std::string common = EventsWithLiveAndStep("greatest");
  const int w = p.warmup_steps;
  std::vector<SqlQuestion> out;
  out.push_back(
      {"diverged",
       absl::StrCat(
           "WITH ", common, ",\n",
           "cohort AS (SELECT step, median(floor) AS med FROM floors GROUP BY step),\n"
           "rel AS (SELECT f.rank, f.step, c.med, f.floor - c.med AS dev\n"
           "        FROM floors f JOIN cohort c USING (step) WHERE f.step >= ",
           w,
           "),\n"
           "base AS (SELECT rank, median(dev) AS b FROM rel WHERE step < ",
           w + p.baseline_steps,
           " GROUP BY rank),\n"
           "chg AS (SELECT r.rank, r.step, r.med, r.dev - b.b AS x FROM rel r JOIN base b USING "
           "(rank)),\n"
           "cmed AS (SELECT step, median(x) AS mx FROM chg GROUP BY step),\n"
           "flagged AS (SELECT c.rank, c.step, c.x - m.mx AS excess FROM chg c JOIN cmed m USING "
           "(step)\n"
           "            WHERE abs(c.x - m.mx) >= greatest(",
           p.min_excess_bytes, ", ", p.min_excess_fraction,
           " * c.med)),\n"
           "runs AS (SELECT rank, step, sign(excess) AS side,\n"
           "         step - row_number() OVER (PARTITION BY rank, sign(excess) ORDER BY step) AS "
           "grp\n"
           "         FROM flagged),\n"
           "onsets AS (SELECT rank, min(step) AS onset FROM runs GROUP BY rank, side, grp\n"
           "           HAVING count(*) >= ",
           p.persistence_steps,
           ")\n"
           "SELECT rank, min(onset) AS onset_step FROM onsets GROUP BY rank\n"
           "ORDER BY onset_step, rank LIMIT 5")});
  out.push_back(
      {"growth",
       absl::StrCat(
           "WITH ", common, ",\n",
           "m AS (SELECT rank, step, kind, bytes,\n"
           "        CASE WHEN kind = 2 THEN lag(tag) OVER (PARTITION BY rank, address ORDER BY "
           "seq)\n"
           "             ELSE tag END AS tag\n"
           "      FROM ev WHERE kind IN (1, 2)),\n"
           "d AS (SELECT rank, tag, step, sum(CASE WHEN kind = 1 THEN bytes ELSE -bytes END) AS "
           "delta\n"
           "      FROM m GROUP BY rank, tag, step),\n"
           "l AS (SELECT rank, tag, step,\n"
           "        sum(delta) OVER (PARTITION BY rank, tag ORDER BY step ROWS UNBOUNDED "
           "PRECEDING) AS live\n"
           "      FROM d),\n"
           "fit AS (SELECT rank, tag, regr_slope(live, step) AS slope, max(step) - min(step) AS "
           "span,\n"
           "          count(*) AS n FROM l WHERE step >= ",
           w,
           " GROUP BY rank, tag)\n"
           "SELECT coalesce(s.value, 'tag#' || fit.tag) AS tag, count(*) AS ranks_growing,\n"
           "       sum(slope) AS bytes_per_step\n"
           "FROM fit LEFT JOIN strings s ON s.rank = fit.rank AND s.id = fit.tag AND s.kind = 1\n"
           "WHERE n >= 8 AND slope * span >= ",
           p.min_growth_bytes,
           "\n"
           "GROUP BY 1 ORDER BY bytes_per_step DESC LIMIT 5")});
  out.push_back(
      {"leaks",
       absl::StrCat("WITH ", common, ",\n",
                    "fit AS (SELECT rank, regr_slope(floor, step) AS slope, regr_r2(floor, step) "
                    "AS r2,\n"
                    "          max(step) - min(step) AS span FROM floors WHERE step >= ",
                    w, " GROUP BY rank)\n",
                    "SELECT rank, slope AS bytes_per_step, r2 FROM fit\n"
                    "WHERE slope * span >= ",
                    p.min_growth_bytes, " AND r2 >= 0.5 ORDER BY rank LIMIT 20")});
  out.push_back(
      {"live",
       absl::StrCat(
           "WITH r AS (\n"
           "  SELECT rank, kind, tag, bytes,\n"
           "    lead(kind) OVER (PARTITION BY rank, address ORDER BY seq) AS next_kind\n"
           "  FROM events WHERE rank IN (",
           RankList(p), ") AND kind IN (1, 2) AND ts <= ", p.live_at_ns,
           "),\n"
           "live AS (SELECT r.rank, coalesce(s.value, '') AS tag, sum(r.bytes) AS bytes, count(*) "
           "AS n\n"
           "  FROM r LEFT JOIN strings s ON s.rank = r.rank AND s.id = r.tag AND s.kind = 1\n"
           "  WHERE r.kind = 1 AND r.next_kind IS NULL GROUP BY r.rank, 2),\n"
           "others AS (SELECT tag, median(bytes) AS others_median FROM live WHERE rank <> ",
           p.live_rank,
           " GROUP BY tag)\n"
           "SELECT me.tag, me.bytes, me.n, coalesce(o.others_median, 0) AS others_median\n"
           "FROM live me LEFT JOIN others o USING (tag) WHERE me.rank = ",
           p.live_rank,
           "\n"
           "ORDER BY me.bytes DESC LIMIT 10")});
  return out;
}

std::vector<SqlQuestion> SqliteQuestions(const SqlParams& p) {
  const std::string common = EventsWithLiveAndStep("max");
  const int w = p.warmup_steps;
  // sqlite has no median(): the middle row(s) of a per-group ranking.
  std::vector<SqlQuestion> out;
  out.push_back(
      {"diverged",
       absl::StrCat(
           "WITH ", common, ",\n",
           "ranked AS (SELECT step, floor, row_number() OVER (PARTITION BY step ORDER BY floor) "
           "AS rn,\n"
           "             count(*) OVER (PARTITION BY step) AS cnt FROM floors),\n"
           "cohort AS (SELECT step, avg(floor) AS med FROM ranked\n"
           "           WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY step),\n"
           "rel AS (SELECT f.rank, f.step, c.med, f.floor - c.med AS dev\n"
           "        FROM floors f JOIN cohort c USING (step) WHERE f.step >= ",
           w,
           "),\n"
           "base AS (SELECT rank, avg(dev) AS b FROM rel WHERE step < ",
           w + p.baseline_steps,
           " GROUP BY rank),\n"
           "chg AS (SELECT r.rank, r.step, r.med, r.dev - b.b AS x FROM rel r JOIN base b USING "
           "(rank)),\n"
           "cranked AS (SELECT step, x, row_number() OVER (PARTITION BY step ORDER BY x) AS rn,\n"
           "              count(*) OVER (PARTITION BY step) AS cnt FROM chg),\n"
           "cmed AS (SELECT step, avg(x) AS mx FROM cranked WHERE rn IN ((cnt + 1) / 2, (cnt + 2) "
           "/ 2)\n"
           "         GROUP BY step),\n"
           "flagged AS (SELECT c.rank, c.step, c.x - m.mx AS excess FROM chg c JOIN cmed m USING "
           "(step)\n"
           "            WHERE abs(c.x - m.mx) >= max(",
           p.min_excess_bytes, ", ", p.min_excess_fraction,
           " * c.med)),\n"
           "runs AS (SELECT rank, step, sign(excess) AS side,\n"
           "         step - row_number() OVER (PARTITION BY rank, sign(excess) ORDER BY step) AS "
           "grp\n"
           "         FROM flagged),\n"
           "onsets AS (SELECT rank, min(step) AS onset FROM runs GROUP BY rank, side, grp\n"
           "           HAVING count(*) >= ",
           p.persistence_steps,
           ")\n"
           "SELECT rank, min(onset) AS onset_step FROM onsets GROUP BY rank\n"
           "ORDER BY onset_step, rank LIMIT 5")});
  out.push_back(
      {"live",
       absl::StrCat(
           "WITH r AS (\n"
           "  SELECT rank, kind, tag, bytes,\n"
           "    lead(kind) OVER (PARTITION BY rank, address ORDER BY seq) AS next_kind\n"
           "  FROM events WHERE rank = ",
           p.live_rank, " AND kind IN (1, 2) AND ts <= ", p.live_at_ns,
           ")\n"
           "SELECT coalesce(s.value, '') AS tag, sum(r.bytes) AS bytes, count(*) AS n\n"
           "FROM r LEFT JOIN strings s ON s.rank = r.rank AND s.id = r.tag AND s.kind = 1\n"
           "WHERE r.kind = 1 AND r.next_kind IS NULL GROUP BY 1 ORDER BY 2 DESC LIMIT 10")});
  return out;
}

absl::StatusOr<std::string> EnsureDuckDb(const std::string& cache_dir, absl::Duration timeout) {
  const std::string marker = cache_dir + "/node_modules/@duckdb/node-api/package.json";
  std::error_code ec;
  if (std::filesystem::exists(marker, ec)) return cache_dir;
  std::filesystem::create_directories(cache_dir, ec);
  absl::StatusOr<CommandResult> r = RunCommand(
      absl::StrCat("cd ", cli::ShellWord(cache_dir),
                   " && npm install --no-audit --no-fund --loglevel=error @duckdb/node-api"),
      timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 || !std::filesystem::exists(marker, ec)) {
    return absl::UnavailableError(absl::StrCat("npm install @duckdb/node-api in ", cache_dir,
                                               " failed (exit ", r->exit_code,
                                               "): ", r->output.substr(0, 2000)));
  }
  return cache_dir;
}

namespace {

constexpr const char* kNodeScript = R"JS(
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const inst = await DuckDBInstance.create(':memory:', { threads: String(cfg.threads) });
const con = await inst.connect();
const ver = (await con.runAndReadAll('SELECT version() AS v')).getRowObjectsJson()[0].v;
console.log('ENGINE DuckDB ' + ver);
const ev = `read_csv('${cfg.events_csv}', header=true, columns=${cfg.events_columns})`;
const st = `read_csv('${cfg.strings_csv}', header=true, columns=${cfg.strings_columns})`;
await con.run(`CREATE TABLE strings AS SELECT * FROM ${st}`);
// Cold: the question straight over the CSV file, as a first look at an export would.
await con.run(`CREATE VIEW events AS SELECT * FROM ${ev}`);
const cold = {}, answers = {};
for (const q of cfg.questions) {
  const t0 = performance.now();
  const r = await con.runAndReadAll(q.sql);
  cold[q.name] = performance.now() - t0;
  answers[q.name] = JSON.stringify(r.getRowObjectsJson().slice(0, 5));
}
await con.run('DROP VIEW events');
const t0 = performance.now();
await con.run(`CREATE TABLE events AS SELECT * FROM ${ev}`);
console.log('LOAD_MS ' + (performance.now() - t0));
for (const q of cfg.questions) {
  const times = [];
  for (let i = 0; i < cfg.repeats; ++i) {
    const t = performance.now();
    await con.runAndReadAll(q.sql);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  console.log(`Q ${q.name} ${cold[q.name]} ${times[Math.floor(times.length / 2)]} ${answers[q.name]}`);
}
)JS";

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Parses "ENGINE ...", "LOAD_MS x" and "Q name cold warm answer" lines.
absl::StatusOr<SqlRun> ParseRun(const std::string& output, size_t expected) {
  SqlRun run;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "ENGINE ")) run.engine = std::string(line);
    if (absl::ConsumePrefix(&line, "LOAD_MS ")) (void)absl::SimpleAtod(line, &run.load_ms);
    if (absl::ConsumePrefix(&line, "Q ")) {
      std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (parts.size() < 3) continue;
      SqlTiming t;
      t.name = parts[0];
      if (!absl::SimpleAtod(parts[1], &t.cold_ms) || !absl::SimpleAtod(parts[2], &t.warm_ms)) {
        continue;
      }
      if (parts.size() > 3) t.answer = parts[3];
      run.questions.push_back(t);
    }
  }
  if (run.questions.size() != expected) {
    return absl::InternalError(absl::StrCat("expected ", expected, " timed questions, got ",
                                            run.questions.size(),
                                            "; output: ", output.substr(0, 3000)));
  }
  return run;
}

}  // namespace

absl::StatusOr<SqlRun> RunDuckDb(const std::string& module_dir, const CsvExport& csv,
                                 const std::vector<SqlQuestion>& questions, int warm_repeats,
                                 int threads, absl::Duration timeout) {
  const std::string script = module_dir + "/memtrace_bench_questions.mjs";
  const std::string config = csv.events_csv + ".duckdb.json";
  std::vector<std::string> qs;
  for (const SqlQuestion& q : questions) {
    qs.push_back(absl::StrCat("{\"name\":", cli::JsonQuoted(q.name),
                              ",\"sql\":", cli::JsonQuoted(q.sql), "}"));
  }
  const std::string json = absl::StrCat(
      "{\"events_csv\":", cli::JsonQuoted(csv.events_csv),
      ",\"strings_csv\":", cli::JsonQuoted(csv.strings_csv),
      ",\"events_columns\":", cli::JsonQuoted(kEventColumns),
      ",\"strings_columns\":", cli::JsonQuoted(kStringColumns), ",\"threads\":", threads,
      ",\"repeats\":", std::max(1, warm_repeats), ",\"questions\":[", absl::StrJoin(qs, ","), "]}");
  if (absl::Status s = WriteFile(script, kNodeScript); !s.ok()) return s;
  if (absl::Status s = WriteFile(config, json); !s.ok()) return s;
  absl::StatusOr<CommandResult> r =
      RunCommand(absl::StrCat("cd ", cli::ShellWord(module_dir), " && node ",
                              cli::ShellWord(script), " ", cli::ShellWord(config)),
                 timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 || r->timed_out) {
    return absl::InternalError(absl::StrCat("DuckDB run failed (exit ", r->exit_code,
                                            r->timed_out ? ", timed out" : "",
                                            "): ", r->output.substr(0, 3000)));
  }
  return ParseRun(r->output, questions.size());
}

absl::StatusOr<SqlRun> RunSqlite(const CsvExport& csv, const std::vector<SqlQuestion>& questions,
                                 int warm_repeats, absl::Duration timeout) {
  std::string script =
      ".bail on\n"
      "CREATE TABLE events(rank INTEGER, seq INTEGER, ts INTEGER, kind INTEGER, address "
      "INTEGER, bytes INTEGER, tag INTEGER);\n"
      "CREATE TABLE strings(rank INTEGER, id INTEGER, kind INTEGER, value TEXT);\n"
      // .import is not timed by .timer: read the clock around it.
      ".mode list\n"
      "SELECT 'CLOCK', (julianday('now') - 2440587.5) * 86400000.0;\n";
  absl::StrAppend(&script, ".import --csv --skip 1 ", csv.events_csv, " events\n",
                  ".import --csv --skip 1 ", csv.strings_csv, " strings\n",
                  "SELECT 'CLOCK', (julianday('now') - 2440587.5) * 86400000.0;\n", ".mode csv\n");
  const int repeats = 1 + std::max(1, warm_repeats);
  for (const SqlQuestion& q : questions) {
    for (int i = 0; i < repeats; ++i) {
      absl::StrAppend(&script, ".print RUN ", q.name, " ", i, "\n.timer on\n", q.sql, ";\n",
                      ".timer off\n");
    }
  }
  const std::string path = csv.events_csv + ".sqlite.sql";
  if (absl::Status s = WriteFile(path, script); !s.ok()) return s;
  absl::StatusOr<CommandResult> r =
      RunCommand(absl::StrCat("sqlite3 :memory: < ", cli::ShellWord(path)), timeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 || r->timed_out) {
    return absl::InternalError(absl::StrCat("sqlite3 run failed (exit ", r->exit_code,
                                            r->timed_out ? ", timed out" : "",
                                            "): ", r->output.substr(0, 3000)));
  }
  SqlRun run;
  absl::StatusOr<CommandResult> version = RunCommand("sqlite3 -version", absl::Seconds(10));
  run.engine = absl::StrCat("sqlite ",
                            version.ok() ? std::string(absl::StripAsciiWhitespace(version->output))
                                               .substr(0, version->output.find(' '))
                                         : "?");
  // "Run Time: real 0.123 user ..." follows each timed statement.
  std::string current;
  int index = -1;
  std::vector<double> times;
  std::string answer;
  auto finish = [&] {
    if (current.empty() || times.empty()) return;
    SqlTiming t;
    t.name = current;
    t.cold_ms = times[0];
    std::vector<double> warm(times.begin() + 1, times.end());
    std::sort(warm.begin(), warm.end());
    t.warm_ms = warm.empty() ? times[0] : warm[warm.size() / 2];
    t.answer = answer;
    run.questions.push_back(t);
  };
  std::vector<double> clocks;
  for (absl::string_view line : absl::StrSplit(r->output, '\n')) {
    if (absl::ConsumePrefix(&line, "CLOCK|")) {
      double ms = 0;
      if (absl::SimpleAtod(line, &ms)) clocks.push_back(ms);
      continue;
    }
    if (absl::ConsumePrefix(&line, "RUN ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 2) continue;
      int i = 0;
      (void)absl::SimpleAtoi(parts[1], &i);
      if (parts[0] != current) {
        finish();
        current = parts[0];
        times.clear();
        answer.clear();
      }
      index = i;
      continue;
    }
    if (absl::ConsumePrefix(&line, "Run Time: real ")) {
      double s = 0;
      (void)absl::SimpleAtod(line.substr(0, line.find(' ')), &s);
      times.push_back(s * 1000);
      continue;
    }
    if (index == 0 && !line.empty() && answer.size() < 300) {
      absl::StrAppend(&answer, answer.empty() ? "" : "; ", line);
    }
  }
  finish();
  if (clocks.size() == 2) run.load_ms = clocks[1] - clocks[0];
  if (run.questions.size() != questions.size()) {
    return absl::InternalError(absl::StrCat("sqlite3: expected ", questions.size(),
                                            " timed questions, got ", run.questions.size()));
  }
  return run;
}

}  // namespace memtrace::bench
