#include "perseus/cli/progress.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

namespace perseus::cli {

std::function<void(const SolveProgress&)> solve_progress_printer() {
  using Clock = std::chrono::steady_clock;
  struct State {
    std::optional<SolveProgress::Phase> phase;
    Clock::time_point last{};
  };
  auto state = std::make_shared<State>();
  return [state](const SolveProgress& p) {
    const auto now = Clock::now();
    if (state->phase == p.phase && now - state->last < std::chrono::milliseconds(500)) return;
    state->phase = p.phase;
    state->last = now;
    if (p.phase == SolveProgress::Phase::kCrawl) {
      fmt::print(stderr, "perseus: crawling the frontier: step {} of at most {}\n", p.done, p.total);
    } else {
      fmt::print(stderr, "perseus: refining the frontier: {} of {} plans\n", p.done, p.total);
    }
  };
}

}  // namespace perseus::cli
