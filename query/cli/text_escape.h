// Quoting text for the formats memtrace writes by hand: JSON strings (the CLI's --format json,
// the benchmark's query plans, the generated Python module of agent variables), CSV fields and
// XML/SVG text, POSIX shell words (the command lines memtrace prints for a user to run). One
// implementation each, so that a job id with a quote or a control character
// comes out valid everywhere.
#ifndef MEMTRACE_QUERY_CLI_TEXT_ESCAPE_H_
#define MEMTRACE_QUERY_CLI_TEXT_ESCAPE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace memtrace::cli {

// `text` as a JSON string literal, quotes included: '"' and '\' escaped, \n \r \t by name,
// other control characters as \u00XX. Bytes >= 0x80 pass through (UTF-8 stays UTF-8).
std::string JsonQuoted(absl::string_view text);

// `text` as one CSV field (RFC 4180): unchanged unless it holds ',', '"', CR or LF; then in
// double quotes with each '"' doubled.
std::string CsvField(absl::string_view text);

// `text` safe inside XML 1.0 text and attribute values: & < > " ' as entities; control
// characters other than tab and newline dropped (XML 1.0 allows none of them but CR, which a
// parser would turn into a newline anyway).
std::string XmlEscaped(absl::string_view text);

// `text` as one POSIX shell word: unchanged when it is not empty and holds only letters, digits
// and _ @ % + : , . / - ('=' is quoted: a first word NAME=x would be an assignment); otherwise in
// single quotes, each ' written as '\''. Pasted into sh, bash or zsh it is `text` again, whatever
// it holds.
std::string ShellWord(absl::string_view text);

// `text` safe to print in a line of a text table or report: control characters (a newline in a
// job id would start a row of its own) as C escapes, \n \r \t by name and the others as \xNN;
// everything else unchanged.
std::string TerminalText(absl::string_view text);

}  // namespace memtrace::cli

#endif  // MEMTRACE_QUERY_CLI_TEXT_ESCAPE_H_
