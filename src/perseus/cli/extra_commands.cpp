#include "perseus/cli/commands.hpp"

namespace perseus::cli {

void add_extra_commands(CLI::App& app) { (void)app; }

}  // namespace perseus::cli
