// The perseus command line: every subcommand only parses flags, calls the library and
// presents the results; each group registers itself from its own file.
//
// `perseus cluster ...` runs perseus-cluster (cluster_main.cpp), the executable beside this
// one, with the same arguments: Gavel's scheduler links CLP, CBC and libslurm, which would
// otherwise be loaded at the start of every command (about 12 ms of a process's start on a
// 2-core machine, against 30 ms for a whole `perseus optimize`).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/cli/commands.hpp"

namespace {

// Replaces this process with perseus-cluster; returns only when that fails.
int run_cluster(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path helper = (error ? std::filesystem::path(argv[0]) : self).parent_path() / "perseus-cluster";
  ::execv(helper.c_str(), argv);
  fmt::print(stderr, "perseus: internal error: cannot run {} (`perseus cluster` runs it): {}\n", helper.string(),
             std::strerror(errno));
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "cluster") return run_cluster(argv);
  CLI::App app{"perseus: energy scheduling for large-model training (Perseus, SOSP'24)"};
  app.require_subcommand(1);
  perseus::cli::add_solver_commands(app);
  perseus::cli::add_emulator_commands(app);
  perseus::cli::add_server_commands(app);
  perseus::cli::add_planner_commands(app);
  perseus::cli::add_runs_commands(app);
  perseus::cli::add_kareus_commands(app);
  perseus::cli::add_geo_commands(app);
  // Listed in --help; never parsed here (see above).
  app.add_subcommand("cluster", perseus::cli::kClusterDescription);
  return perseus::cli::run_command_line(app, argc, argv);
}
