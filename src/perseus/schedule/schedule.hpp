// Pipeline schedules: the per-stage order of instructions for one training iteration.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus {

// Every pipeline schedule perseus knows. The synchronous ones flush the pipeline every
// iteration and make_schedule builds them; the asynchronous ones (PipeDream, PipeDream-2BW)
// never flush, and the planner builds them as steady-state windows of the 1F1B order
// (planner/schedules.hpp: async_window_schedule, flushes, update_semantics).
enum class ScheduleKind {
  k1F1B,                 // PipeDream-Flush, the DeepSpeed/Megatron order (docs/solver.md)
  kGPipe,                // all forwards, then all backwards
  kInterleaved1F1B,      // Megatron-LM virtual pipeline with `chunks` model chunks per device
  // 1F1B with every backward immediately preceded by its forward's recomputation, on every
  // stage (uniform, the last stage included). R depends only on program order, so it overlaps
  // the wait for the gradient (Merak's early recomputation).
  k1F1BEarlyRecompute,
  kPipeDream,            // asynchronous 1F1B with weight stashing, no flush
  kPipeDream2BW,         // double-buffered weights, gradient accumulation, no flush
  // Interleaved 1F1B with every backward immediately preceded by its chunk's recomputation
  // (Megatron-LM's full activation recomputation on the virtual pipeline).
  kInterleaved1F1BRecompute,
};

// Interleaved 1F1B, with or without recomputation: the kinds that take `chunks` > 1.
constexpr bool is_interleaved(ScheduleKind kind) {
  return kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kInterleaved1F1BRecompute;
}
// The kinds whose iteration recomputes each forward right before its backward.
constexpr bool recomputes(ScheduleKind kind) {
  return kind == ScheduleKind::k1F1BEarlyRecompute || kind == ScheduleKind::kInterleaved1F1BRecompute;
}

// "1f1b", "gpipe", "interleaved-1f1b", "1f1b-recompute", "pipedream", "pipedream-2bw",
// "interleaved-1f1b-recompute".
std::string_view to_string(ScheduleKind kind);
// Inverse of to_string, case-insensitive, with the aliases "interleaved" (interleaved-1f1b),
// "pipedream-flush" (1f1b) and "2bw" (pipedream-2bw). Throws InputError listing the known names.
ScheduleKind parse_schedule_kind(std::string_view name);

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int stages = 1;        // S
  int microbatches = 1;  // M
  int chunks = 1;        // v, interleaved only
  // A load instruction L(m) on stage 0 right before each microbatch's first forward
  // (chunk 0), in program order.
  bool data_load = false;
};

struct Schedule {
  ScheduleSpec spec;
  std::vector<std::vector<Instruction>> per_stage;  // execution order on each device
  std::size_t num_instructions() const;
};

// Checks a spec without building anything, in O(1): throws InputError for an asynchronous
// kind (PipeDream, PipeDream-2BW: no flushed iteration to build), S, M or v outside 1..their
// limit (model/limits.hpp), more instructions than limits::kMaxInstructions, v > 1 with a
// non-interleaved kind, or M not a multiple of S for interleaved 1F1B.
void validate_schedule(const ScheduleSpec& spec);
// The schedule of `spec`, after validate_schedule's checks (its errors).
Schedule make_schedule(const ScheduleSpec& spec);

}  // namespace perseus
