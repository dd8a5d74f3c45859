// optireduce-run: starts an MPI job with OptiReduce preloaded on every rank, whatever launches it.
//
//   optireduce-run [options] -- <mpirun|mpiexec|srun> [launcher arguments...]
//
// It picks the preload library built for the MPI being launched (Open MPI: liboptireduce.so,
// MPICH: liboptireduce-mpich.so), puts it first in LD_PRELOAD, and inserts right after the
// launcher's name the arguments that give every rank that LD_PRELOAD and every OPTIREDUCE_*
// setting, in the syntax of that launcher (launcher_plan.hpp). Then it becomes the launcher
// (execvp). No MPI here: optireduce_engine is linked only to check the settings exactly as
// MPI_Init will.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli_errors.hpp"
#include "launcher_plan.hpp"
#include "launcher_probe.hpp"
#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/report/report.hpp"

#ifndef OPTIREDUCE_BIN_TO_LIB
#define OPTIREDUCE_BIN_TO_LIB "../lib"
#endif
#ifndef OPTIREDUCE_INSTALL_LIBDIR
#define OPTIREDUCE_INSTALL_LIBDIR "/usr/local/lib"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
using optireduce::tools::Launcher;

constexpr const char* kTool = "optireduce-run";

// Which MPI the ranks run, hence which preload library.
enum class Flavor { openmpi, mpich };

const char* name_of(Flavor f) { return f == Flavor::openmpi ? "Open MPI" : "MPICH"; }
const char* library_of(Flavor f) { return f == Flavor::openmpi ? "liboptireduce.so" : "liboptireduce-mpich.so"; }

// A usage problem (bad option, unknown launcher): one line and exit 2. Anything else: exit 1.
struct Failure {
  std::string message;
  int code;
};

[[noreturn]] void fail(std::string message, int code = 2) { throw Failure{std::move(message), code}; }

struct Options {
  std::string mode, transport, report, log, library, launcher_flavor, mpi_flavor;
  bool dry_run = false;
  std::vector<std::string> command;
};

bool contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

Launcher detect_launcher(const std::string& launcher) {
  // srun is known by its name (it need not exist on the node that prepares a batch script).
  if (fs::path(launcher).filename() == "srun") return Launcher::slurm;
  const auto probe = optireduce::tools::run_probe(launcher, "--version");
  if (!probe.ran) fail("cannot run '" + launcher + " --version' to tell which MPI it launches: " + probe.error);
  const std::string& v = probe.output;
  if (contains(v, "Open MPI") || contains(v, "OpenRTE")) return Launcher::openmpi;
  if (contains(v, "HYDRA") || contains(v, "MPICH") || contains(v, "Intel(R) MPI")) return Launcher::hydra;
  if (contains(v, "slurm")) return Launcher::slurm;
  std::string first = v.substr(0, v.find('\n'));
  if (first.size() > 80) first = first.substr(0, 80) + "...";
  fail("unknown launcher '" + launcher + "': its --version (\"" + first +
       "\") names neither Open MPI nor MPICH/HYDRA; supported: Open MPI mpirun/mpiexec, MPICH mpiexec(.hydra), "
       "srun (or say which with --launcher-flavor)");
}

// Debian's Open MPI has no PMI-2 client: under srun its ranks need PMIx. Added only when the job
// names no plugin itself, Slurm has no default for it (SLURM_MPI_TYPE) and this srun offers pmix.
std::string srun_mpi_option(Flavor flavor, const std::vector<std::string>& command) {
  if (flavor != Flavor::openmpi || std::getenv("SLURM_MPI_TYPE")) return {};
  if (optireduce::tools::names_mpi_plugin({command.begin() + 1, command.end()})) return {};
  const auto probe = optireduce::tools::run_probe(command.front(), "--mpi=list");
  return probe.ran && optireduce::tools::lists_pmix(probe.output) ? "--mpi=pmix" : "";
}

fs::path own_directory() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// Next to this executable first (build tree: bin/../lib; install tree: bin/../lib), then the
// configured install prefix.
fs::path find_library(Flavor flavor) {
  std::vector<fs::path> dirs;
  const fs::path here = own_directory();
  if (!here.empty()) {
    dirs.push_back((here / "../lib").lexically_normal());
    dirs.push_back((here / OPTIREDUCE_BIN_TO_LIB).lexically_normal());
  }
  dirs.push_back(fs::path(OPTIREDUCE_INSTALL_LIBDIR).lexically_normal());
  std::vector<fs::path> looked;
  for (const auto& d : dirs) {
    if (std::find(looked.begin(), looked.end(), d) != looked.end()) continue;
    looked.push_back(d);
    std::error_code ec;
    if (fs::is_regular_file(d / library_of(flavor), ec)) return d / library_of(flavor);
  }
  std::string where;
  for (const auto& d : looked) where += (where.empty() ? "" : ", ") + d.string();
  fail(std::string("no ") + library_of(flavor) + " (the library for " + name_of(flavor) + ") in " + where +
           (flavor == Flavor::mpich ? "; build it with MPICH installed (OPTIREDUCE_MPI_FLAVORS includes mpich)" : "") +
           ", or name one with --library",
       1);
}

// OPTIREDUCE_* of the environment, then the options; sorted by name; checked as MPI_Init checks
// them, output paths included (as seen from here: on a cluster, a shared file system).
optireduce::Environment job_settings(const Options& o) {
  std::map<std::string, std::string> settings;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "OPTIREDUCE_", 11) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq) settings[std::string(*e, static_cast<std::size_t>(eq - *e))] = eq + 1;
  }
  if (!o.mode.empty()) settings["OPTIREDUCE_MODE"] = o.mode;
  if (!o.transport.empty()) settings["OPTIREDUCE_TRANSPORT"] = o.transport;
  if (!o.report.empty()) settings["OPTIREDUCE_REPORT"] = fs::absolute(o.report).lexically_normal().string();
  if (!o.log.empty()) settings["OPTIREDUCE_LOG"] = o.log;
  const optireduce::Environment env(settings.begin(), settings.end());
  const auto parsed = optireduce::parse_config(env);
  if (!parsed.ok()) fail(parsed.error);
  for (const auto& [name, path] : {std::pair{"OPTIREDUCE_REPORT", parsed.config.report_path},
                                   std::pair{"OPTIREDUCE_TRACE", parsed.config.trace_path}})
    if (const auto why = path.empty() ? std::string() : optireduce::output_path_problem(path); !why.empty())
      fail(std::string(name) + "=\"" + path + "\" is not writable: " + why + "; accepted: a writable file path");
  return env;
}

int launch(const optireduce::tools::Plan& plan, bool dry_run) {
  if (dry_run) {
    std::string line;
    for (const auto& [name, value] : plan.environment) line += name + "=" + optireduce::tools::shell_quote(value) + " ";
    for (std::size_t i = 0; i < plan.argv.size(); ++i) line += (i ? " " : "") + optireduce::tools::shell_quote(plan.argv[i]);
    std::printf("%s\n", line.c_str());
    return 0;
  }
  for (const auto& [name, value] : plan.environment) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : plan.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  execvp(args[0], args.data());
  std::fprintf(stderr, "%s: error: cannot run %s: %s\n", kTool, args[0], std::strerror(errno));
  return 127;
}

int run(const Options& o) {
  if (o.command.empty()) fail("no launcher: give the command after --, e.g. optireduce-run -- mpirun -np 4 ./train");
  Launcher launcher;
  if (o.launcher_flavor.empty()) launcher = detect_launcher(o.command.front());
  else if (o.launcher_flavor == "openmpi") launcher = Launcher::openmpi;
  else if (o.launcher_flavor == "hydra" || o.launcher_flavor == "mpich") launcher = Launcher::hydra;
  else launcher = Launcher::slurm;
  Flavor flavor = launcher == Launcher::hydra ? Flavor::mpich : Flavor::openmpi;
  if (o.mpi_flavor == "mpich") flavor = Flavor::mpich;
  else if (o.mpi_flavor == "openmpi") flavor = Flavor::openmpi;

  const optireduce::Environment env = job_settings(o);
  const std::string lib = o.library.empty() ? find_library(flavor).string() : fs::absolute(o.library).lexically_normal().string();
  optireduce::tools::Variables variables{{"LD_PRELOAD", optireduce::tools::preload_value(lib, std::getenv("LD_PRELOAD"))}};
  variables.insert(variables.end(), env.begin(), env.end());
  const std::string mpi_option = launcher == Launcher::slurm ? srun_mpi_option(flavor, o.command) : "";
  return launch(optireduce::tools::make_plan(launcher, o.command, variables, mpi_option), o.dry_run);
}

// Accepts a value of an OPTIREDUCE_* variable exactly when MPI_Init would.
CLI::Validator setting_validator(const std::string& variable) {
  std::string accepted;
  for (const auto& p : optireduce::parameters())
    if (variable == p.name) accepted = p.accepted;
  return CLI::Validator(
      [variable, accepted](std::string& value) -> std::string {
        if (optireduce::parse_config({{variable, value}}).ok()) return {};
        return "\"" + value + "\" is not accepted; accepted: " + accepted;
      },
      "", variable);
}

std::string accepted_text(const char* variable) {
  for (const auto& p : optireduce::parameters())
    if (p.name == variable) return p.accepted;
  return {};
}

constexpr const char* kFooter = R"(Right after the launcher's name it inserts what gives every rank LD_PRELOAD (the library
first, then what LD_PRELOAD already held) and every OPTIREDUCE_* variable of its own environment
(the options above override them):
  Open MPI mpirun/mpiexec   -x LD_PRELOAD=<lib> -x OPTIREDUCE_MODE=reliable ...
  MPICH mpiexec(.hydra)     -genv LD_PRELOAD <lib> -genv OPTIREDUCE_MODE reliable ...
  Slurm srun                --export=ALL,LD_PRELOAD=<lib>,OPTIREDUCE_MODE=reliable,...
                            (added to the job's own --export instead, if it has one), and
                            --mpi=pmix for Open MPI when the job names no --mpi, SLURM_MPI_TYPE
                            is unset and 'srun --mpi=list' offers pmix
The launcher is told by what '<launcher> --version' prints ("Open MPI"; "HYDRA" or "MPICH"), srun by
its name; --launcher-flavor skips that. The library: liboptireduce.so for Open MPI,
liboptireduce-mpich.so for MPICH, looked up in ../lib next to this program, then in )" OPTIREDUCE_INSTALL_LIBDIR R"(.
The settings are checked as MPI_Init checks them (OPTIREDUCE_REPORT and OPTIREDUCE_TRACE must be
writable here), so a bad one stops here instead of in the job.
Then it runs the command (execvp): the exit status is the launcher's.
Exit status of its own: 2 for a usage error (bad option or setting, no or unknown launcher),
1 when the library is missing, 127 when the launcher cannot be run.
Examples:
  optireduce-run --report report.json -- mpirun -np 4 ./train
  optireduce-run --mode reliable -- mpiexec.mpich -n 4 ./train
  optireduce-run --mpi-flavor mpich -- srun -n 4 ./train
  optireduce-run --dry-run -- mpirun -np 4 ./train
)";

void declare_options(CLI::App& app, Options& o) {
  app.add_option("--mode", o.mode, "OPTIREDUCE_MODE for the job: " + accepted_text("OPTIREDUCE_MODE"))
      ->check(setting_validator("OPTIREDUCE_MODE"))
      ->type_name("MODE");
  app.add_option("--transport", o.transport, "OPTIREDUCE_TRANSPORT for the job: " + accepted_text("OPTIREDUCE_TRANSPORT"))
      ->check(setting_validator("OPTIREDUCE_TRANSPORT"))
      ->type_name("NAME");
  app.add_option("--report", o.report,
                 "OPTIREDUCE_REPORT for the job: rank 0 writes the JSON report of all ranks to this file at "
                 "MPI_Finalize (a relative path is made absolute here)")
      ->type_name("FILE");
  app.add_option("--log", o.log, "OPTIREDUCE_LOG for the job: " + accepted_text("OPTIREDUCE_LOG"))
      ->check(setting_validator("OPTIREDUCE_LOG"))
      ->type_name("LEVEL");
  app.add_option("--library", o.library, "preload this library instead of looking one up")->check(CLI::ExistingFile);
  app.add_option("--launcher-flavor", o.launcher_flavor,
                 "how to pass variables, instead of asking '<launcher> --version': openmpi (-x), "
                 "hydra or mpich (-genv), srun or slurm (--export)")
      ->check(CLI::IsMember({"openmpi", "hydra", "mpich", "srun", "slurm"}))
      ->type_name("KIND");
  app.add_option("--mpi-flavor", o.mpi_flavor,
                 "the MPI the ranks run, which picks the library: openmpi or mpich (default: what the launcher "
                 "belongs to; for srun, openmpi)")
      ->check(CLI::IsMember({"openmpi", "mpich"}))
      ->type_name("MPI");
  app.add_flag("--dry-run", o.dry_run, "print the command (shell-quoted) instead of running it, and exit 0");
  app.add_option("launcher", o.command, "after --: the launcher (mpirun, mpiexec, srun) and its arguments, unchanged")
      ->type_name("");
  app.footer(kFooter);
  optireduce::tools::add_version_flag(app);
  optireduce::tools::use_single_line_errors(app);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Starts an MPI job with OptiReduce-MPI preloaded on every rank:\n"
      "  optireduce-run [options] -- <mpirun|mpiexec|srun> [launcher arguments...]",
      kTool};
  Options options;
  declare_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    // CLI11 lists a "--" among them; name only what is wrong, and where the launcher goes.
    std::string list;
    int count = 0;
    for (const auto& a : app.remaining())
      if (a != "--") list += (count++ ? " " : "") + a;
    std::fprintf(stderr, "%s: error: %s %s of %s; the launcher and its arguments go after --, e.g. "
                 "%s --mode reliable -- mpirun -np 4 ./train (see --help)\n", kTool, list.c_str(),
                 count > 1 ? "are not options" : "is not an option", kTool, kTool);
    return 2;
  } catch (const CLI::ParseError& e) {
    return optireduce::tools::exit_code(app, e, true);
  }
  try {
    return run(options);
  } catch (const Failure& f) {
    std::fprintf(stderr, "%s: error: %s\n", kTool, f.message.c_str());
    return f.code;
  }
}
