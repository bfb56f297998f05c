// Progress messages on stderr for the commands that solve: one line when a phase starts and
// at most one every half second after, so a long crawl shows it is alive without flooding.
#pragma once

#include <functional>

#include "perseus/solver/solve.hpp"

namespace perseus::cli {

std::function<void(const SolveProgress&)> solve_progress_printer();

}  // namespace perseus::cli
