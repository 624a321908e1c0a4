#include "tools/launch/run_args.h"

#include "absl/strings/match.h"

namespace memtrace::launch {
namespace {

// "--no-agent" -> "--no_agent", "--agent-lib=x-y" -> "--agent_lib=x-y".
std::string NormalizeFlag(const std::string& arg) {
  std::string out = arg;
  size_t end = out.find('=');
  if (end == std::string::npos) end = out.size();
  for (size_t i = 2; i < end; ++i) {
    if (out[i] == '-') out[i] = '_';
  }
  return out;
}

}  // namespace

SplitArguments SplitRunArguments(const std::vector<std::string>& args,
                                 const std::set<std::string>& flags_with_values) {
  SplitArguments out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") break;
    std::string flag = absl::StartsWith(arg, "--") ? NormalizeFlag(arg) : arg;
    out.flags.push_back(flag);
    const std::string name = flag.substr(flag.find_first_not_of('-'));
    if (name.find('=') == std::string::npos && flags_with_values.count(name) > 0 &&
        i + 1 < args.size()) {
      out.flags.push_back(args[++i]);
    }
  }
  out.command.assign(args.begin() + i, args.end());
  return out;
}

}  // namespace memtrace::launch
