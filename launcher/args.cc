#include "launcher/args.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/edit_distance.h"
#include "common/status.h"
#include "launcher/command.h"

namespace pstrain::launcher {
namespace {

absl::Status Expand(const std::vector<std::string>& argv, int depth, std::vector<Arg>* out) {
  if (depth > 4) return absl::InvalidArgumentError("flagfiles nested too deeply");
  for (size_t i = 0; i < argv.size(); ++i) {
    absl::string_view a = argv[i];
    if (!absl::StartsWith(a, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "' (flags look like --name=value)"));
    }
    a = absl::StripPrefix(absl::StripPrefix(a, "-"), "-");
    Arg arg;
    size_t eq = a.find('=');
    if (eq != absl::string_view::npos) {
      arg.name = std::string(a.substr(0, eq));
      arg.value = std::string(a.substr(eq + 1));
      arg.has_value = true;
    } else {
      arg.name = std::string(a);
      if (i + 1 < argv.size() && !absl::StartsWith(argv[i + 1], "--")) {
        arg.value = argv[++i];
        arg.has_value = true;
      } else {
        arg.value = "true";
      }
    }
    if (arg.name.empty()) return absl::InvalidArgumentError("empty flag name");
    if (arg.name == "flagfile") {
      PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(arg.value));
      std::vector<std::string> lines;
      for (absl::string_view line : absl::StrSplit(text, '\n')) {
        line = absl::StripAsciiWhitespace(line);
        if (line.empty() || line[0] == '#') continue;
        lines.emplace_back(line);
      }
      PS_RETURN_IF_ERROR(Annotate(Expand(lines, depth + 1, out), arg.value));
      continue;
    }
    // A bare flag is passed on bare: "--noverlap=true" would not parse.
    arg.text = arg.has_value ? absl::StrCat("--", arg.name, "=", arg.value) : absl::StrCat("--", arg.name);
    out->push_back(std::move(arg));
  }
  return absl::OkStatus();
}

}  // namespace

std::string DidYouMean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(name, c);
    if (best == nullptr || d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  // A typo: a third of the name's letters at most (and at least one).
  if (best == nullptr || best_distance > std::max<size_t>(1, name.size() / 3)) return "";
  return absl::StrCat(" (did you mean --", *best, "?)");
}

bool WantsHelp(const std::vector<std::string>& argv) {
  for (const std::string& a : argv) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

absl::StatusOr<std::vector<Arg>> ParseArgs(const std::vector<std::string>& argv) {
  std::vector<Arg> out;
  PS_RETURN_IF_ERROR(Expand(argv, 0, &out));
  return out;
}

FlagSet& FlagSet::Define(const std::string& name, const std::string& default_value,
                         const std::string& help) {
  flags_[name] = Flag{default_value, help};
  order_.push_back(name);
  return *this;
}

absl::StatusOr<std::vector<Arg>> FlagSet::Take(const std::vector<Arg>& args, bool keep_unknown) {
  std::vector<Arg> rest;
  for (const Arg& a : args) {
    if (flags_.count(a.name)) {
      set_[a.name] = a.value;
    } else if (keep_unknown) {
      rest.push_back(a);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", a.name, DidYouMean(a.name, order_)));
    }
  }
  return rest;
}

absl::StatusOr<std::vector<Arg>> FlagSet::Parse(const std::vector<std::string>& argv,
                                                bool keep_unknown) {
  absl::StatusOr<std::vector<Arg>> args = ParseArgs(argv);
  if (args.ok()) args = Take(*args, keep_unknown);
  if (!args.ok()) return UsageError(args.status().message());
  return args;
}

std::string FlagSet::Get(const std::string& name) const {
  auto it = set_.find(name);
  if (it != set_.end()) return it->second;
  auto f = flags_.find(name);
  return f == flags_.end() ? "" : f->second.default_value;
}

absl::StatusOr<int64_t> FlagSet::GetInt(const std::string& name) const {
  int64_t v = 0;
  if (!absl::SimpleAtoi(Get(name), &v)) {
    return UsageError(absl::StrCat("--", name, " must be an integer, not '", Get(name), "'"));
  }
  return v;
}

absl::StatusOr<double> FlagSet::GetDouble(const std::string& name) const {
  double v = 0;
  if (!absl::SimpleAtod(Get(name), &v)) {
    return UsageError(absl::StrCat("--", name, " must be a number, not '", Get(name), "'"));
  }
  return v;
}

bool FlagSet::GetBool(const std::string& name) const {
  std::string v = Get(name);
  return v == "true" || v == "1" || v == "yes";
}

std::string FlagSet::Help() const {
  std::string out;
  for (const std::string& name : order_) {
    const Flag& f = flags_.at(name);
    absl::StrAppend(&out, "  --", name, " (default: ", f.default_value.empty() ? "\"\"" : f.default_value,
                    ")\n      ", f.help, "\n");
  }
  return out;
}

}  // namespace pstrain::launcher
