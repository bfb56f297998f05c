// perseus-cluster: `perseus cluster ...` (main.cpp runs this executable with its own
// arguments, so usage and errors read as perseus's).
#include <CLI/CLI.hpp>

#include "perseus/cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"perseus: energy scheduling for large-model training (Perseus, SOSP'24)", "perseus"};
  app.require_subcommand(1);
  perseus::cli::add_cluster_commands(app);
  return perseus::cli::run_command_line(app, argc, argv);
}
