// Placeholder while the emulator commands are being written (this session); replaced by them.
#include "perseus/cli/commands.hpp"

namespace perseus::cli {

void add_emulator_commands(CLI::App& app) { (void)app; }

}  // namespace perseus::cli
