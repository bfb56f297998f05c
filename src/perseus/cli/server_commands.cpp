// `perseus serve`: the server's flags and lifecycle live with the server module.
#include "perseus/cli/commands.hpp"
#include "perseus/server/server_command.hpp"

namespace perseus::cli {

void add_server_commands(CLI::App& app) { server::add_server_command(app); }

}  // namespace perseus::cli
