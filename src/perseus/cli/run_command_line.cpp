#include <fmt/format.h>

#include "perseus/cli/commands.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::cli {

int run_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; any flag the user got wrong is bad input, exit status 2 like the
    // library's InputError (CLI11's own codes, 100 and up, would say nothing more).
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const InputError& e) {
    fmt::print(stderr, "perseus: error: {}\n", e.what());
    return 2;
  } catch (const SolveError& e) {
    fmt::print(stderr, "perseus: cannot solve: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus: internal error: {}\n", e.what());
    return 4;
  }
  return 0;
}

}  // namespace perseus::cli
