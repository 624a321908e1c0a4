#include "query/export/svg_test_util.h"

#include <cctype>

namespace memtrace::exporter::testing {
namespace {

// Attributes of the start tag beginning at `at` (just after "<tag").
Attributes ParseAttributes(const std::string& svg, size_t at) {
  Attributes attributes;
  size_t i = at;
  while (i < svg.size() && svg[i] != '>') {
    while (i < svg.size() && std::isspace(static_cast<unsigned char>(svg[i]))) ++i;
    size_t name_start = i;
    while (i < svg.size() && svg[i] != '=' && svg[i] != '>' && svg[i] != '/' &&
           !std::isspace(static_cast<unsigned char>(svg[i]))) {
      ++i;
    }
    std::string name = svg.substr(name_start, i - name_start);
    if (i < svg.size() && svg[i] == '=' && i + 1 < svg.size() && svg[i + 1] == '"') {
      size_t value_end = svg.find('"', i + 2);
      if (value_end == std::string::npos) break;
      attributes[name] = svg.substr(i + 2, value_end - i - 2);
      i = value_end + 1;
    } else if (name.empty()) {
      ++i;
    }
  }
  return attributes;
}

}  // namespace

std::vector<Attributes> Elements(const std::string& svg, const std::string& tag,
                                 const std::string& css_class) {
  std::vector<Attributes> out;
  std::string open = "<" + tag;
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    size_t after = at + open.size();
    if (after >= svg.size() || !std::isspace(static_cast<unsigned char>(svg[after]))) continue;
    Attributes attributes = ParseAttributes(svg, after);
    if (!css_class.empty() && attributes["class"] != css_class) continue;
    out.push_back(std::move(attributes));
  }
  return out;
}

Attributes Root(const std::string& svg) {
  std::vector<Attributes> roots = Elements(svg, "svg");
  return roots.empty() ? Attributes() : roots.front();
}

}  // namespace memtrace::exporter::testing
