// `perseus serve`: the HTTP/JSON server training jobs talk to (docs/runtime.md, "The server").
#pragma once

#include <CLI/CLI.hpp>

namespace perseus::server {

// Registers the `serve` subcommand (flags --host, --port, --db, --token, --threads,
// --log-level, ...; the ZEUS_PFO_* environment settings are read as well).
void add_server_command(CLI::App& app);

}  // namespace perseus::server

namespace perseus {
using server::add_server_command;
}
