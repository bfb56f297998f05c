// The perseus command line: every subcommand only parses flags, calls the library and
// presents the results; each group registers itself from its own file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/cli/commands.hpp"
#include "perseus/model/errors.hpp"

int main(int argc, char** argv) {
  CLI::App app{"perseus: energy scheduling for large-model training (Perseus, SOSP'24)"};
  app.require_subcommand(1);
  perseus::cli::add_solver_commands(app);
  perseus::cli::add_emulator_commands(app);
  perseus::cli::add_server_commands(app);
  perseus::cli::add_planner_commands(app);
  perseus::cli::add_runs_commands(app);
  perseus::cli::add_kareus_commands(app);
  perseus::cli::add_geo_commands(app);
  perseus::cli::add_cluster_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; any flag the user got wrong is bad input, exit status 2 like the
    // library's InputError (CLI11's own codes, 100 and up, would say nothing more).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const perseus::InputError& e) {
    fmt::print(stderr, "perseus: error: {}\n", e.what());
    return 2;
  } catch (const perseus::SolveError& e) {
    fmt::print(stderr, "perseus: cannot solve: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus: internal error: {}\n", e.what());
    return 4;
  }
  return 0;
}
