// Test helper: reads back the elements and data attributes of an SVG that svg_plot.h wrote.
#ifndef MEMTRACE_QUERY_EXPORT_SVG_TEST_UTIL_H_
#define MEMTRACE_QUERY_EXPORT_SVG_TEST_UTIL_H_

#include <map>
#include <string>
#include <vector>

namespace memtrace::exporter::testing {

using Attributes = std::map<std::string, std::string>;

// Every start tag named `tag` (e.g. "polyline") whose class attribute is `css_class` (any class
// when empty), in document order, with its attributes (entities left as written).
std::vector<Attributes> Elements(const std::string& svg, const std::string& tag,
                                 const std::string& css_class = "");

// The root <svg> element's attributes.
Attributes Root(const std::string& svg);

}  // namespace memtrace::exporter::testing

#endif  // MEMTRACE_QUERY_EXPORT_SVG_TEST_UTIL_H_
