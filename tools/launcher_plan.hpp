// The command optireduce-run builds: after the launcher's name, what gives every rank
// LD_PRELOAD and the OPTIREDUCE_* settings, in that launcher's syntax.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace optireduce::tools {

// How the launcher takes environment variables for the ranks.
enum class Launcher { openmpi, hydra, slurm };

using Variables = std::vector<std::pair<std::string, std::string>>;

struct Plan {
  Variables environment;  // set in our own environment first
  std::vector<std::string> argv;
};

// variables: LD_PRELOAD first, then the OPTIREDUCE_* ones. mpi_option: an srun option to add
// (e.g. "--mpi=pmix"), or empty.
Plan make_plan(Launcher launcher, const std::vector<std::string>& command, const Variables& variables,
               const std::string& mpi_option = {});

// True when the srun arguments choose an MPI plugin themselves (--mpi=..., --mpi ...).
bool names_mpi_plugin(const std::vector<std::string>& srun_arguments);
// True when `srun --mpi=list` printed a pmix plugin ("pmix", "pmix_v4", ...).
bool lists_pmix(const std::string& mpi_list_output);

// The library first, then what `old` (LD_PRELOAD) held, without a second copy of the library.
std::string preload_value(const std::string& library, const char* old);

// POSIX shell quoting: bare when only safe characters, else in single quotes.
std::string shell_quote(const std::string& s);

}  // namespace optireduce::tools
