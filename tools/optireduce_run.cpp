// optireduce-run: starts an MPI job with OptiReduce preloaded on every rank, whatever launches it.
//
//   optireduce-run [options] -- <mpirun|mpiexec|srun> [launcher arguments...]
//
// It picks the preload library built for the MPI being launched (Open MPI: liboptireduce.so,
// MPICH: liboptireduce-mpich.so), puts it first in LD_PRELOAD, and inserts right after the
// launcher's name the arguments that give every rank that LD_PRELOAD and every OPTIREDUCE_*
// setting, in the syntax of that launcher. Then it becomes the launcher (execvp). No MPI here:
// optireduce_core is linked only to check the settings exactly as MPI_Init will.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli_errors.hpp"
#include "optireduce/engine/config.hpp"

#ifndef OPTIREDUCE_BIN_TO_LIB
#define OPTIREDUCE_BIN_TO_LIB "../lib"
#endif
#ifndef OPTIREDUCE_INSTALL_LIBDIR
#define OPTIREDUCE_INSTALL_LIBDIR "/usr/local/lib"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;

constexpr const char* kTool = "optireduce-run";

// How the launcher takes environment variables for the ranks.
enum class Launcher { openmpi, hydra, slurm };
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

// POSIX shell quoting: bare when only safe characters, else in single quotes.
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

// What `<launcher> --version` prints (stdout and stderr), or why it could not run. The launcher's
// stdin is /dev/null, and it gets 10 s.
struct Probe {
  bool ran = false;
  std::string output;
  std::string error;
};

Probe run_version(const std::string& launcher) {
  Probe probe;
  int out[2], status_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
    probe.error = std::strerror(errno);
    return probe;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    probe.error = std::strerror(errno);
    return probe;
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    execlp(launcher.c_str(), launcher.c_str(), "--version", static_cast<char*>(nullptr));
    const int e = errno;
    (void)!write(status_pipe[1], &e, sizeof e);
    _exit(127);
  }
  close(out[1]);
  close(status_pipe[1]);
  int exec_errno = 0;
  const bool exec_failed = read(status_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(status_pipe[0]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool timed_out = false;
  char buffer[4096];
  while (probe.output.size() < (1u << 20)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    probe.output.append(buffer, static_cast<std::size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (exec_failed) probe.error = std::strerror(exec_errno);
  else if (timed_out) probe.error = "no answer within 10 s";
  else probe.ran = true;
  return probe;
}

bool contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

Launcher detect_launcher(const std::string& launcher) {
  // srun is known by its name (it need not exist on the node that prepares a batch script).
  if (fs::path(launcher).filename() == "srun") return Launcher::slurm;
  const Probe probe = run_version(launcher);
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

// The library first, then what LD_PRELOAD held (without a second copy of the library).
std::string preload_value(const std::string& library) {
  std::string value = library;
  const char* old = std::getenv("LD_PRELOAD");
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

struct Plan {
  std::vector<std::pair<std::string, std::string>> environment;  // set in our own environment first
  std::vector<std::string> argv;
};

// variables: LD_PRELOAD first, then the OPTIREDUCE_* ones.
Plan make_plan(Launcher launcher, const std::vector<std::string>& command,
               const std::vector<std::pair<std::string, std::string>>& variables) {
  Plan plan;
  plan.argv.push_back(command.front());
  std::vector<std::string> rest(command.begin() + 1, command.end());
  switch (launcher) {
    case Launcher::openmpi:
      // -x NAME=VALUE: the value travels on the command line, so mpirun and its daemons are not
      // preloaded themselves and the printed command is complete.
      for (const auto& [name, value] : variables) {
        plan.argv.push_back("-x");
        plan.argv.push_back(name + "=" + value);
      }
      break;
    case Launcher::hydra:
      for (const auto& [name, value] : variables) {
        plan.argv.push_back("-genv");
        plan.argv.push_back(name);
        plan.argv.push_back(value);
      }
      break;
    case Launcher::slurm: {
      // srun cannot escape a comma inside --export: such a value goes into srun's own
      // environment and is named without a value (ALL carries it).
      std::string list;
      for (const auto& [name, value] : variables) {
        if (value.find(',') != std::string::npos) {
          plan.environment.emplace_back(name, value);
          list += "," + name;
        } else {
          list += "," + name + "=" + value;
        }
      }
      // A user's own --export would replace ours (srun keeps the last): extend theirs instead.
      for (std::size_t i = 0; i < rest.size(); ++i) {
        if (rest[i].rfind("--export=", 0) == 0) {
          rest[i] += list;
          list.clear();
          break;
        }
        if (rest[i] == "--export" && i + 1 < rest.size()) {
          rest[i + 1] += list;
          list.clear();
          break;
        }
      }
      if (!list.empty()) plan.argv.push_back("--export=ALL" + list);
      break;
    }
  }
  plan.argv.insert(plan.argv.end(), rest.begin(), rest.end());
  return plan;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Starts an MPI job with OptiReduce-MPI preloaded on every rank:\n"
      "  optireduce-run [options] -- <mpirun|mpiexec|srun> [launcher arguments...]",
      kTool};
  std::string mode, transport, report, log, library, launcher_flavor, mpi_flavor;
  bool dry_run = false;
  std::vector<std::string> command;
  app.add_option("--mode", mode, "OPTIREDUCE_MODE for the job: " + accepted_text("OPTIREDUCE_MODE"))
      ->check(setting_validator("OPTIREDUCE_MODE"))
      ->type_name("MODE");
  app.add_option("--transport", transport, "OPTIREDUCE_TRANSPORT for the job: " + accepted_text("OPTIREDUCE_TRANSPORT"))
      ->check(setting_validator("OPTIREDUCE_TRANSPORT"))
      ->type_name("NAME");
  app.add_option("--report", report,
                 "OPTIREDUCE_REPORT for the job: rank 0 writes the JSON report of all ranks to this file at "
                 "MPI_Finalize (a relative path is made absolute here)")
      ->type_name("FILE");
  app.add_option("--log", log, "OPTIREDUCE_LOG for the job: " + accepted_text("OPTIREDUCE_LOG"))
      ->check(setting_validator("OPTIREDUCE_LOG"))
      ->type_name("LEVEL");
  app.add_option("--library", library, "preload this library instead of looking one up")->check(CLI::ExistingFile);
  app.add_option("--launcher-flavor", launcher_flavor,
                 "how to pass variables, instead of asking '<launcher> --version': openmpi (-x), "
                 "hydra or mpich (-genv), srun or slurm (--export)")
      ->check(CLI::IsMember({"openmpi", "hydra", "mpich", "srun", "slurm"}))
      ->type_name("KIND");
  app.add_option("--mpi-flavor", mpi_flavor,
                 "the MPI the ranks run, which picks the library: openmpi or mpich (default: what the launcher "
                 "belongs to; for srun, openmpi)")
      ->check(CLI::IsMember({"openmpi", "mpich"}))
      ->type_name("MPI");
  app.add_flag("--dry-run", dry_run, "print the command (shell-quoted) instead of running it, and exit 0");
  app.add_option("launcher", command, "after --: the launcher (mpirun, mpiexec, srun) and its arguments, unchanged")
      ->type_name("");
  app.footer(R"(Right after the launcher's name it inserts what gives every rank LD_PRELOAD (the library
first, then what LD_PRELOAD already held) and every OPTIREDUCE_* variable of its own environment
(the options above override them):
  Open MPI mpirun/mpiexec   -x LD_PRELOAD=<lib> -x OPTIREDUCE_MODE=reliable ...
  MPICH mpiexec(.hydra)     -genv LD_PRELOAD <lib> -genv OPTIREDUCE_MODE reliable ...
  Slurm srun                --export=ALL,LD_PRELOAD=<lib>,OPTIREDUCE_MODE=reliable,...
                            (added to the job's own --export instead, if it has one)
The launcher is told by what '<launcher> --version' prints ("Open MPI"; "HYDRA" or "MPICH"), srun by
its name; --launcher-flavor skips that. The library: liboptireduce.so for Open MPI,
liboptireduce-mpich.so for MPICH, looked up in ../lib next to this program, then in )" OPTIREDUCE_INSTALL_LIBDIR R"(.
The settings are checked as MPI_Init checks them, so a bad one stops here instead of in the job.
Then it runs the command (execvp): the exit status is the launcher's.
Exit status of its own: 2 for a usage error (bad option or setting, no or unknown launcher),
1 when the library is missing, 127 when the launcher cannot be run.
Examples:
  optireduce-run --report report.json -- mpirun -np 4 ./train
  optireduce-run --mode reliable -- mpiexec.mpich -n 4 ./train
  optireduce-run --mpi-flavor mpich -- srun -n 4 ./train
  optireduce-run --dry-run -- mpirun -np 4 ./train
)");
  optireduce::tools::add_version_flag(app);
  optireduce::tools::use_single_line_errors(app);
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
    if (command.empty()) fail("no launcher: give the command after --, e.g. optireduce-run -- mpirun -np 4 ./train");

    Launcher launcher;
    if (launcher_flavor.empty()) launcher = detect_launcher(command.front());
    else if (launcher_flavor == "openmpi") launcher = Launcher::openmpi;
    else if (launcher_flavor == "hydra" || launcher_flavor == "mpich") launcher = Launcher::hydra;
    else launcher = Launcher::slurm;

    Flavor flavor = launcher == Launcher::hydra ? Flavor::mpich : Flavor::openmpi;
    if (mpi_flavor == "mpich") flavor = Flavor::mpich;
    else if (mpi_flavor == "openmpi") flavor = Flavor::openmpi;

    // OPTIREDUCE_* of the environment, then the options; sorted by name.
    std::map<std::string, std::string> settings;
    for (char** e = environ; e && *e; ++e) {
      if (std::strncmp(*e, "OPTIREDUCE_", 11) != 0) continue;
      const char* eq = std::strchr(*e, '=');
      if (eq) settings[std::string(*e, static_cast<std::size_t>(eq - *e))] = eq + 1;
    }
    if (!mode.empty()) settings["OPTIREDUCE_MODE"] = mode;
    if (!transport.empty()) settings["OPTIREDUCE_TRANSPORT"] = transport;
    if (!report.empty()) settings["OPTIREDUCE_REPORT"] = fs::absolute(report).lexically_normal().string();
    if (!log.empty()) settings["OPTIREDUCE_LOG"] = log;
    const optireduce::Environment env(settings.begin(), settings.end());
    const auto parsed = optireduce::parse_config(env);
    if (!parsed.ok()) fail(parsed.error);

    const std::string lib = library.empty() ? find_library(flavor).string() : fs::absolute(library).lexically_normal().string();
    std::vector<std::pair<std::string, std::string>> variables{{"LD_PRELOAD", preload_value(lib)}};
    variables.insert(variables.end(), env.begin(), env.end());
    const Plan plan = make_plan(launcher, command, variables);

    if (dry_run) {
      std::string line;
      for (const auto& [name, value] : plan.environment) line += name + "=" + shell_quote(value) + " ";
      for (std::size_t i = 0; i < plan.argv.size(); ++i) line += (i ? " " : "") + shell_quote(plan.argv[i]);
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
  } catch (const Failure& f) {
    std::fprintf(stderr, "%s: error: %s\n", kTool, f.message.c_str());
    return f.code;
  }
}
