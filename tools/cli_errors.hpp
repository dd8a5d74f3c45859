// One way for every tool to end on a bad command line: a single "<tool>: error: ..." line and exit
// code 2 (usage error), or the help (or --version) text and 0.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "optireduce/optireduce.h"

namespace optireduce::tools {

// Call once the options are declared.
inline void use_single_line_errors(CLI::App& app) {
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return a->get_name() + ": error: " + e.what() + " (see --help)\n";
  });
}

// The version this tool was built as ("<tool> 0.1.0"): --version prints it and exits 0.
inline std::string version_text(const std::string& tool) {
  return tool + " " + std::to_string(OPTIREDUCE_VERSION_MAJOR) + "." + std::to_string(OPTIREDUCE_VERSION_MINOR) + "." +
         std::to_string(OPTIREDUCE_VERSION_PATCH);
}
inline void add_version_flag(CLI::App& app) { app.set_version_flag("--version", version_text(app.get_name())); }

// Prints (when `print`) and returns the exit code for a parse error.
inline int exit_code(const CLI::App& app, const CLI::ParseError& e, bool print) {
  if (print) app.exit(e);
  return e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
}

}  // namespace optireduce::tools
