#include "tools/bench/figure_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace memtrace::bench {
namespace {

std::string TargetText(const Figure& f) {
  std::vector<std::string> parts;
  const char* op = f.better == Better::kHigher ? ">= " : "<= ";
  if (f.target) parts.push_back(absl::StrCat(op, FormatNumber(*f.target), " ", f.unit));
  if (f.ratio_target) parts.push_back(absl::StrCat(op, FormatNumber(*f.ratio_target), "x"));
  return absl::StrJoin(parts, ", ");
}

std::string RatioText(const Figure& f) {
  std::optional<double> r = Ratio(f);
  if (!r) return "";
  return absl::StrCat(FormatNumber(*r), "x");
}

std::string MetText(const Figure& f) {
  std::optional<bool> met = MeetsTarget(f);
  if (!met) return "";
  return *met ? "yes" : "NO";
}

std::vector<std::string> Cells(const Figure& f) {
  return {f.name,
          absl::StrCat(FormatNumber(f.value), " ", f.unit),
          f.baseline,
          f.baseline_value ? absl::StrCat(FormatNumber(*f.baseline_value), " ", f.unit) : "",
          RatioText(f),
          TargetText(f),
          MetText(f)};
}

const std::vector<std::string>& Headers() {
  static const auto* headers = new std::vector<std::string>{
      "figure", "value", "baseline (same run)", "baseline value", "ratio", "target", "met"};
  return *headers;
}

}  // namespace

std::optional<double> Ratio(const Figure& figure) {
  if (!figure.baseline_value || *figure.baseline_value == 0) return std::nullopt;
  return figure.value / *figure.baseline_value;
}

std::optional<bool> MeetsTarget(const Figure& figure) {
  if (!figure.target && !figure.ratio_target) return std::nullopt;
  auto good = [&](double v, double t) {
    return figure.better == Better::kHigher ? v >= t : v <= t;
  };
  bool met = true;
  if (figure.target) met = met && good(figure.value, *figure.target);
  if (figure.ratio_target) {
    std::optional<double> r = Ratio(figure);
    met = met && r.has_value() && good(*r, *figure.ratio_target);
  }
  return met;
}

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "n/a";
  const double a = std::fabs(value);
  const char* suffix = "";
  double v = value;
  if (a >= 1e9) {
    v = value / 1e9;
    suffix = " G";
  } else if (a >= 1e6) {
    v = value / 1e6;
    suffix = " M";
  } else if (a >= 1e4) {
    v = value / 1e3;
    suffix = " k";
  }
  const double av = std::fabs(v);
  std::string digits;
  if (av == 0) {
    digits = "0";
  } else if (av >= 100) {
    digits = absl::StrFormat("%.0f", v);
  } else if (av >= 10) {
    digits = absl::StrFormat("%.1f", v);
  } else if (av >= 1) {
    digits = absl::StrFormat("%.2f", v);
  } else {
    digits = absl::StrFormat("%.3g", v);
  }
  return absl::StrCat(digits, suffix);
}

std::string RenderText(const std::vector<Figure>& figures) {
  std::vector<std::string> headers = Headers();
  std::vector<size_t> widths(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) widths[i] = headers[i].size();
  for (const Figure& f : figures) {
    std::vector<std::string> cells = Cells(f);
    for (size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "  " : "  ", cells[i],
                      std::string(widths[i] - cells[i].size(), ' '));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(headers);
  std::string section;
  for (const Figure& f : figures) {
    if (f.section != section) {
      section = f.section;
      absl::StrAppend(&out, "[", section, "]\n");
    }
    absl::StrAppend(&out, line(Cells(f)));
  }
  return out;
}

std::string RenderMarkdown(const std::vector<Figure>& figures) {
  std::vector<std::string> headers = Headers();
  headers.insert(headers.begin(), "section");
  headers.push_back("notes");
  std::string out = absl::StrCat("| ", absl::StrJoin(headers, " | "), " |\n|");
  for (size_t i = 0; i < headers.size(); ++i) absl::StrAppend(&out, "---|");
  absl::StrAppend(&out, "\n");
  for (const Figure& f : figures) {
    std::vector<std::string> cells = Cells(f);
    cells.insert(cells.begin(), f.section);
    cells.push_back(f.note);
    for (std::string& c : cells) {
      std::string escaped;
      for (char ch : c) {
        if (ch == '|') escaped += "\\|";
        else escaped += ch;
      }
      c = escaped;
    }
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  return out;
}

}  // namespace memtrace::bench
