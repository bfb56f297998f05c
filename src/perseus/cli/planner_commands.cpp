// Placeholder while the planner commands are being written (this session); replaced by them.
#include "perseus/cli/commands.hpp"

namespace perseus::cli {

void add_planner_commands(CLI::App& app) { (void)app; }

}  // namespace perseus::cli
