#include "perseus/planner/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus::planner {
namespace {

void check(int stages, int microbatches, int chunks) {
  if (stages < 1 || microbatches < 1 || chunks < 1) {
    throw InputError("schedule: stages, microbatches and chunks must be at least 1");
  }
}

}  // namespace

std::string_view update_semantics(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B:
    case ScheduleKind::kInterleaved1F1B:
    case ScheduleKind::k1F1BEarlyRecompute:
    case ScheduleKind::kInterleaved1F1BRecompute:
      return "synchronous: the pipeline flushes every iteration; W(t+1) = W(t) - nu*grad f(W(t))";
    case ScheduleKind::kPipeDream:
      return "asynchronous: every backward updates its stage; weight stashing pairs each forward and backward "
             "on one version; stage s uses W(t-S+s+1)";
    case ScheduleKind::kPipeDream2BW:
      return "1-stale: a new version every m microbatches, double-buffered; W(t+1) = W(t) - nu*grad f(W(t-1))";
  }
  return "";
}

bool flushes(ScheduleKind kind) {
  return kind != ScheduleKind::kPipeDream && kind != ScheduleKind::kPipeDream2BW;
}

ScheduleKind core_schedule_kind(ScheduleKind kind) { return flushes(kind) ? kind : ScheduleKind::k1F1B; }

std::vector<StageFootprint> memory_footprint(ScheduleKind kind, int S, int M, int v) {
  check(S, M, v);
  std::vector<StageFootprint> out(S);
  for (int s = 0; s < S; ++s) {
    StageFootprint& f = out[s];
    switch (kind) {
      case ScheduleKind::kGPipe:
        f.activation_stashes = f.full_activations = M;
        break;
      case ScheduleKind::k1F1B:
        f.activation_stashes = f.full_activations = std::min(S - s, M);
        break;
      case ScheduleKind::kInterleaved1F1B:
      case ScheduleKind::kInterleaved1F1BRecompute:
        // Warm-up forwards (docs/solver.md, "Schedules") plus the one in flight during the
        // steady state; with M = S everything is warm-up (as in Megatron-LM).
        f.activation_stashes = M == S ? M * v : std::min((S - s - 1) * 2 + (v - 1) * S + 1, M * v);
        f.full_activations = kind == ScheduleKind::kInterleaved1F1B ? f.activation_stashes : 1;
        break;
      case ScheduleKind::k1F1BEarlyRecompute:
        f.activation_stashes = std::min(S - s, M);
        f.full_activations = 1;
        break;
      case ScheduleKind::kPipeDream:
        f.activation_stashes = f.full_activations = S - s;
        f.weight_versions = S - s;
        break;
      case ScheduleKind::kPipeDream2BW:
        // Stage s's S - s in-flight microbatches span 1 + ceil((S-s-1)/M) versions when a new
        // one comes every M backwards: two buffers hold them only when M >= S (the double
        // buffering itself keeps two, the last stage included).
        f.activation_stashes = f.full_activations = S - s;
        f.weight_versions = std::max(2, 1 + (S - s - 1 + M - 1) / M);
        break;
    }
  }
  return out;
}

double bubble_fraction(ScheduleKind kind, int S, int M, int v) {
  check(S, M, v);
  if (!flushes(kind)) return 0.0;
  if (is_interleaved(kind)) return (S - 1.0) / (v * static_cast<double>(M));
  return (S - 1.0) / M;
}

double bubble_share(ScheduleKind kind, int S, int M, int v) { return bubble_share(bubble_fraction(kind, S, M, v)); }

double iteration_time_closed_form(ScheduleKind kind, int S, int M, int v, double tf, double tb) {
  check(S, M, v);
  if (!flushes(kind)) return M * (tf + tb);
  const double per_microbatch = tf + tb + (recomputes(kind) ? tf : 0.0);
  const double chunks = is_interleaved(kind) ? v : 1.0;
  return (M + (S - 1.0) / chunks) * per_microbatch;
}

Schedule async_window_schedule(int S, int W, bool recompute) {
  check(S, W, 1);
  // Stage s's steady-state sequence, indexed by h: F(h/2 + S-1-s) for even h, B((h-1)/2) for odd
  // h. Starting stage s at h = s + 1 lines the stages up in time when t_f = t_b (stage s+1 is one
  // instruction ahead of stage s in 1F1B's steady state), and keeps every dependency between
  // windows pointing forwards: each microbatch's chain F(0..S-1), B(S-1..0) advances one
  // position in the window per step, so a window holds a contiguous stretch of it.
  Schedule out{ScheduleSpec{recompute ? ScheduleKind::k1F1BEarlyRecompute : ScheduleKind::k1F1B, S, W + S, 1, false},
               {}};
  out.per_stage.resize(S);
  for (int s = 0; s < S; ++s) {
    out.per_stage[s].reserve((recompute ? 3 : 2) * static_cast<std::size_t>(W));
    for (int h = s + 1; h < s + 1 + 2 * W; ++h) {
      if (h % 2 == 0) {
        out.per_stage[s].push_back(Instruction{InstructionKind::kForward, s, h / 2 + S - 1 - s, 0});
        continue;
      }
      // Early recomputation as the core's 1f1b-recompute: right before its backward.
      if (recompute) out.per_stage[s].push_back(Instruction{InstructionKind::kRecompute, s, h / 2, 0});
      out.per_stage[s].push_back(Instruction{InstructionKind::kBackward, s, h / 2, 0});
    }
  }
  return out;
}

double async_window_time_closed_form(int S, int W, double tf, double tb) {
  check(S, W, 1);
  return W * (tf + tb) + std::min((S - 1) / 2, W) * std::abs(tb - tf);
}

std::vector<int> peak_in_flight(const Schedule& schedule) {
  std::vector<int> out;
  for (const auto& stage : schedule.per_stage) {
    int peak = 0;
    std::set<std::pair<int, int>> in_flight;  // (microbatch, chunk) forwarded, not yet backwarded
    for (const Instruction& ins : stage) {
      if (ins.kind == InstructionKind::kForward) in_flight.insert({ins.microbatch, ins.chunk});
      if (ins.kind == InstructionKind::kBackward) in_flight.erase({ins.microbatch, ins.chunk});
      peak = std::max(peak, static_cast<int>(in_flight.size()));
    }
    out.push_back(peak);
  }
  return out;
}

std::vector<int> simulated_weight_versions(ScheduleKind kind, const Schedule& schedule, int accumulation) {
  if (accumulation < 1) throw InputError("schedule: gradient accumulation must be at least 1");
  const int period = kind == ScheduleKind::kPipeDream2BW ? accumulation : kind == ScheduleKind::kPipeDream ? 1 : 0;
  std::vector<int> out;
  for (const auto& stage : schedule.per_stage) {
    int latest = 0, backwards = 0, peak = 1;
    std::map<std::pair<int, int>, int> stashed;  // (microbatch, chunk) -> version its forward used
    for (const Instruction& ins : stage) {
      if (ins.kind == InstructionKind::kForward) {
        stashed[{ins.microbatch, ins.chunk}] = latest;
      } else if (ins.kind == InstructionKind::kBackward) {
        stashed.erase({ins.microbatch, ins.chunk});
        ++backwards;
        if (period > 0 && backwards % period == 0) ++latest;
      }
      std::set<int> live{latest};
      for (const auto& [key, version] : stashed) live.insert(version);
      peak = std::max(peak, static_cast<int>(live.size()));
    }
    out.push_back(peak);
  }
  return out;
}

}  // namespace perseus::planner
