#include "query/cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "query/analysis/units.h"
#include "query/cli/text_escape.h"

namespace memtrace::cli {
namespace {

bool IsNumeric(ColumnType type) {
  return type == ColumnType::kInt || type == ColumnType::kBytes ||
         type == ColumnType::kSignedBytes || type == ColumnType::kDurationNs;
}

// The cell as a plain number or string, as CSV shows it.
std::string RawText(const Cell& cell) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(uint64_t v) const { return absl::StrCat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
  };
  return std::visit(Visitor{}, cell);
}

// The cell as the text table shows it: units for bytes, UTC for times.
std::string HumanText(const Cell& cell, ColumnType type) {
  if (std::holds_alternative<std::monostate>(cell)) return "-";
  if (const bool* b = std::get_if<bool>(&cell)) return *b ? "yes" : "no";
  const int64_t* s = std::get_if<int64_t>(&cell);
  const uint64_t* u = std::get_if<uint64_t>(&cell);
  switch (type) {
    case ColumnType::kBytes:
      if (u) return FormatBytes(*u);
      if (s) return *s < 0 ? FormatSignedBytes(*s) : FormatBytes(static_cast<uint64_t>(*s));
      break;
    case ColumnType::kSignedBytes:
      if (s) return FormatSignedBytes(*s);
      if (u) return FormatSignedBytes(static_cast<int64_t>(*u));
      break;
    case ColumnType::kTimeNs:
      if (s) return FormatTimeNs(*s);
      if (u) return FormatTimeNs(static_cast<int64_t>(*u));
      break;
    case ColumnType::kDurationNs:
      if (s) return FormatDurationNs(*s);
      if (u) return FormatDurationNs(static_cast<int64_t>(*u));
      break;
    default:
      break;
  }
  if (const std::string* text = std::get_if<std::string>(&cell)) return TerminalText(*text);
  return RawText(cell);
}

std::string JsonValue(const Cell& cell) {
  if (std::holds_alternative<std::monostate>(cell)) return "null";
  if (const std::string* s = std::get_if<std::string>(&cell)) return JsonQuoted(*s);
  return RawText(cell);
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --format '", text, "': expected table, json or csv"));
}

// One formatter for every table, the CLI's and the analyses' (query/analysis/units): the two
// disagreed ("1024 KiB" against "1.00 MiB" for the same bytes).
std::string FormatBytes(uint64_t bytes) {
  return analysis::FormatBytes(static_cast<double>(bytes));
}

std::string FormatSignedBytes(int64_t bytes) {
  if (bytes == 0) return "0 B";
  // Negating INT64_MIN overflows; compute the magnitude in unsigned arithmetic.
  uint64_t magnitude = bytes < 0 ? ~static_cast<uint64_t>(bytes) + 1 : static_cast<uint64_t>(bytes);
  return absl::StrCat(bytes < 0 ? "-" : "+", FormatBytes(magnitude));
}

std::string FormatTimeNs(int64_t ns) {
  if (ns == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

std::string FormatDurationNs(int64_t ns) {
  const absl::Duration d = absl::Trunc(absl::Nanoseconds(ns), absl::Milliseconds(1));
  // Abseil leaves out a zero minute between hours and seconds: 1h0m30.292s read "1h30.292s",
  // which reads as an hour and a half.
  const absl::Duration below_hour = d % absl::Hours(1);
  if (d >= absl::Hours(1) && below_hour > absl::ZeroDuration() && below_hour < absl::Minutes(1)) {
    return absl::StrCat(d / absl::Hours(1), "h0m", absl::FormatDuration(below_hour));
  }
  return absl::FormatDuration(d);
}

void Table::AddRow(std::vector<Cell> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void WriteText(const Table& table, std::ostream& out) {
  const std::vector<Column>& columns = table.columns();
  std::vector<std::vector<std::string>> texts;
  std::vector<size_t> widths(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) widths[c] = columns[c].name.size();
  for (const std::vector<Cell>& row : table.rows()) {
    std::vector<std::string>& line = texts.emplace_back();
    for (size_t c = 0; c < columns.size(); ++c) {
      line.push_back(HumanText(row[c], columns[c].type));
      widths[c] = std::max(widths[c], line.back().size());
    }
  }
  auto write_line = [&](const std::vector<std::string>& fields) {
    std::string line;
    for (size_t c = 0; c < fields.size(); ++c) {
      if (c > 0) line += "  ";
      std::string pad(widths[c] - fields[c].size(), ' ');
      line += IsNumeric(columns[c].type) ? pad + fields[c] : fields[c] + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  };
  std::vector<std::string> header;
  for (const Column& column : columns) header.push_back(column.name);
  write_line(header);
  for (const std::vector<std::string>& line : texts) write_line(line);
}

void WriteCsv(const Table& table, std::ostream& out) {
  const std::vector<Column>& columns = table.columns();
  for (size_t c = 0; c < columns.size(); ++c) {
    out << (c ? "," : "") << CsvField(columns[c].name);
  }
  out << "\n";
  for (const std::vector<Cell>& row : table.rows()) {
    for (size_t c = 0; c < columns.size(); ++c) out << (c ? "," : "") << CsvField(RawText(row[c]));
    out << "\n";
  }
}

void WriteJson(const Table& table, std::ostream& out) {
  const std::vector<Column>& columns = table.columns();
  out << "[";
  bool first_row = true;
  for (const std::vector<Cell>& row : table.rows()) {
    out << (first_row ? "\n  {" : ",\n  {");
    first_row = false;
    for (size_t c = 0; c < columns.size(); ++c) {
      out << (c ? ", " : "") << JsonQuoted(columns[c].name) << ": " << JsonValue(row[c]);
    }
    out << "}";
  }
  out << (first_row ? "]\n" : "\n]\n");
}

void WriteTable(const Table& table, OutputFormat format, std::ostream& out) {
  switch (format) {
    case OutputFormat::kTable:
      WriteText(table, out);
      return;
    case OutputFormat::kCsv:
      WriteCsv(table, out);
      return;
    case OutputFormat::kJson:
      WriteJson(table, out);
      return;
  }
}

}  // namespace memtrace::cli
