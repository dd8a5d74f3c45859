#include "launcher_plan.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

namespace optireduce::tools {
namespace {

// srun cannot escape a comma inside --export: such a value goes into srun's own environment and
// is named without a value (ALL carries it). A user's own --export would replace ours (srun keeps
// the last): it is extended instead.
void add_slurm_exports(Plan& plan, std::vector<std::string>& rest, const Variables& variables) {
  std::string list;
  for (const auto& [name, value] : variables) {
    if (value.find(',') != std::string::npos) {
      plan.environment.emplace_back(name, value);
      list += "," + name;
    } else {
      list += "," + name + "=" + value;
    }
  }
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i].rfind("--export=", 0) == 0) {
      rest[i] += list;
      return;
    }
    if (rest[i] == "--export" && i + 1 < rest.size()) {
      rest[i + 1] += list;
      return;
    }
  }
  plan.argv.push_back("--export=ALL" + list);
}

}  // namespace

Plan make_plan(Launcher launcher, const std::vector<std::string>& command, const Variables& variables,
               const std::string& mpi_option) {
  Plan plan;
  plan.argv.push_back(command.front());
  std::vector<std::string> rest(command.begin() + 1, command.end());
  switch (launcher) {
    case Launcher::openmpi: {
      // -x NAME=VALUE: the value travels on the command line, so mpirun and its daemons are not
      // preloaded themselves and the printed command is complete. A -x reaches only the ranks of
      // its own app context: an MPMD command (A : B) gets them again after each ':'.
      std::vector<std::string> exports;
      for (const auto& [name, value] : variables) {
        exports.push_back("-x");
        exports.push_back(name + "=" + value);
      }
      plan.argv.insert(plan.argv.end(), exports.begin(), exports.end());
      for (std::size_t i = 0; i < rest.size(); ++i)
        if (rest[i] == ":") {
          rest.insert(rest.begin() + static_cast<std::ptrdiff_t>(i) + 1, exports.begin(), exports.end());
          i += exports.size();
        }
      break;
    }
    case Launcher::hydra:
      for (const auto& [name, value] : variables) {
        plan.argv.push_back("-genv");
        plan.argv.push_back(name);
        plan.argv.push_back(value);
      }
      break;
    case Launcher::slurm:
      add_slurm_exports(plan, rest, variables);
      if (!mpi_option.empty()) plan.argv.push_back(mpi_option);
      break;
  }
  plan.argv.insert(plan.argv.end(), rest.begin(), rest.end());
  return plan;
}

bool names_mpi_plugin(const std::vector<std::string>& srun_arguments) {
  return std::any_of(srun_arguments.begin(), srun_arguments.end(),
                     [](const std::string& a) { return a == "--mpi" || a.rfind("--mpi=", 0) == 0; });
}

bool lists_pmix(const std::string& mpi_list_output) {
  std::istringstream lines(mpi_list_output);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 4, "pmix") == 0) return true;
  }
  return false;
}

std::string preload_value(const std::string& library, const char* old) {
  std::string value = library;
  if (!old) return value;
  std::string entry;
  const std::string text = old;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ':' || text[i] == ' ') {
      if (!entry.empty() && entry != library) value += ":" + entry;
      entry.clear();
    } else {
      entry += text[i];
    }
  }
  return value;
}

std::string shell_quote(const std::string& s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("@%+=:,./-_", c);
  });
  if (safe) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace optireduce::tools
