// Rendering of query results: one Table model, three writers (aligned text, CSV, JSON), and
// human byte units. Commands fill a Table with raw values; the writer chosen by --format decides
// how they look, so table, csv and json always carry the same rows.
#ifndef MEMTRACE_QUERY_CLI_OUTPUT_H_
#define MEMTRACE_QUERY_CLI_OUTPUT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memtrace::cli {

enum class OutputFormat { kTable, kJson, kCsv };

// Parses "table", "json" or "csv"; anything else is INVALID_ARGUMENT naming the value.
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text);

// 1536 -> "1.50 KiB", 3 << 30 -> "3.00 GiB", 17 -> "17 B". Three significant digits.
std::string FormatBytes(uint64_t bytes);
// Like FormatBytes with an explicit sign: "+256 MiB", "-1.00 GiB", "0 B".
std::string FormatSignedBytes(int64_t bytes);
// Nanoseconds since the epoch as UTC "2026-12-02 16:54:03.123"; 0 prints "-".
std::string FormatTimeNs(int64_t ns);
// Nanoseconds as a duration rounded to milliseconds: "1m40.5s", "250ms", "0".
std::string FormatDurationNs(int64_t ns);

// How a column's values are typed and shown in the text table (CSV and JSON show raw values).
enum class ColumnType {
  kText,
  kInt,
  kBytes,        // unsigned byte count, human units in the table
  kSignedBytes,  // signed byte difference, "+2.00 MiB"
  kTimeNs,       // ns since the epoch, UTC time in the table
  kDurationNs,   // ns, "1m40.5s" in the table
  kBool,
};

struct Column {
  std::string name;
  ColumnType type = ColumnType::kText;
};

// One cell: empty (JSON null, "-" in tables), text, signed, unsigned or boolean.
using Cell = std::variant<std::monostate, std::string, int64_t, uint64_t, bool>;

// Rows of cells under named, typed columns. A plain value; not thread-safe.
class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // Appends a row; a row shorter than the columns is padded with empty cells, extra cells are
  // dropped (a programming error the writers must not crash on).
  void AddRow(std::vector<Cell> cells);

  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::vector<Cell>>& rows() const { return rows_; }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// Aligned columns with a header line; numbers right-aligned, bytes in human units.
void WriteText(const Table& table, std::ostream& out);
// RFC 4180 CSV with a header line; raw numbers (bytes in bytes, times in ns).
void WriteCsv(const Table& table, std::ostream& out);
// A JSON array of objects keyed by column name; raw numbers, booleans, null for empty cells.
void WriteJson(const Table& table, std::ostream& out);

// Dispatches to one of the writers above.
void WriteTable(const Table& table, OutputFormat format, std::ostream& out);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_OUTPUT_H_
