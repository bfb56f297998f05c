// Subcommand registration: each group of commands lives in its own file and only parses
// flags and presents results; the work is in the library modules.
#pragma once

#include <CLI/CLI.hpp>

namespace perseus::cli {

void add_solver_commands(CLI::App& app);    // optimize, select (solver_commands.cpp)
void add_emulator_commands(CLI::App& app);  // emulate, compare, report (emulator_commands.cpp)
void add_server_commands(CLI::App& app);    // serve (server_commands.cpp)
void add_planner_commands(CLI::App& app);   // profile synth, partition, plan (planner_commands.cpp)
void add_runs_commands(CLI::App& app);      // runs import, runs validate (runs_commands.cpp)

}  // namespace perseus::cli
