// `serve` alone, as the perseus binary runs it, for tests that start the server as its own
// process.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/server/server_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"perseus serve (test binary)"};
  app.require_subcommand(1);
  perseus::add_server_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const perseus::InputError& e) {
    std::fprintf(stderr, "perseus: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "perseus: internal error: %s\n", e.what());
    return 4;
  }
  return 0;
}
