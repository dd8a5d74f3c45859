// One way for both tools to end on a bad command line: a single "<tool>: error: ..." line and exit
// code 2 (usage error), or the help text and 0.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace optireduce::tools {

// Call once the options are declared.
inline void use_single_line_errors(CLI::App& app) {
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return a->get_name() + ": error: " + e.what() + " (see --help)\n";
  });
}

// Prints (when `print`) and returns the exit code for a parse error.
inline int exit_code(const CLI::App& app, const CLI::ParseError& e, bool print) {
  if (print) app.exit(e);
  return e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
}

}  // namespace optireduce::tools
