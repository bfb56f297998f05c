// Subcommand registration: each group of commands lives in its own file and only parses
// flags and presents results; the work is in the library modules.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace perseus::cli {

// Number checks with messages a user reads ("must be positive, got -4"), where CLI11's own name
// the range's floating-point limits. NaN fails both.
inline CLI::Validator sign_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        double value = 0.0;
        try {
          std::size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) return "expected a number, got '" + text + "'";
        } catch (const std::exception&) {
          return "expected a number, got '" + text + "'";
        }
        if (allow_zero ? value >= 0.0 : value > 0.0) return "";
        return std::string(allow_zero ? "must be zero or more" : "must be positive") + ", got " + text;
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
inline const CLI::Validator kPositive = sign_check(false);
inline const CLI::Validator kNonNegative = sign_check(true);

void add_solver_commands(CLI::App& app);    // optimize, select (solver_commands.cpp)
void add_emulator_commands(CLI::App& app);  // emulate, compare, report (emulator_commands.cpp)
void add_server_commands(CLI::App& app);    // serve (server_commands.cpp)
void add_planner_commands(CLI::App& app);   // profile synth, partition, plan (planner_commands.cpp)
void add_runs_commands(CLI::App& app);      // runs import, runs validate (runs_commands.cpp)
void add_kareus_commands(CLI::App& app);    // kareus space, kareus frontier (kareus_commands.cpp)
void add_geo_commands(CLI::App& app);       // geo simulate, select-dcs, bubbletea, fill-or-slow, reproduce (geo_commands.cpp)
// cluster throughputs, allocate, simulate, run, serve (cluster_commands.cpp): in perseus-cluster,
// which `perseus cluster` runs (main.cpp says why).
void add_cluster_commands(CLI::App& app);
inline constexpr const char* kClusterDescription = "Gavel: heterogeneity-aware cluster scheduling";

// Parses the command line and runs the chosen subcommand, with one exit status per kind of
// failure: 0, 2 bad input (flags or data), 3 a solve that cannot succeed, 4 anything else.
int run_command_line(CLI::App& app, int argc, char** argv);

}  // namespace perseus::cli
