// Subcommand registration: each group of commands lives in its own file and only parses
// flags and presents results; the work is in the library modules.
#pragma once

#include <CLI/CLI.hpp>

namespace perseus::cli {

void add_core_commands(CLI::App& app);   // optimize, select
void add_extra_commands(CLI::App& app);  // commands of the later modules (extra_commands.cpp)

}  // namespace perseus::cli
