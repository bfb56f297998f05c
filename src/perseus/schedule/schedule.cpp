#include "perseus/schedule/schedule.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>

#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"

namespace perseus {
namespace {

struct KindName {
  std::string_view name;
  ScheduleKind kind;
};
// The first name of each kind is its canonical one (to_string); later ones are aliases.
constexpr std::array<KindName, 10> kKindNames = {{
    {"1f1b", ScheduleKind::k1F1B},
    {"gpipe", ScheduleKind::kGPipe},
    {"interleaved-1f1b", ScheduleKind::kInterleaved1F1B},
    {"1f1b-recompute", ScheduleKind::k1F1BEarlyRecompute},
    {"pipedream", ScheduleKind::kPipeDream},
    {"pipedream-2bw", ScheduleKind::kPipeDream2BW},
    {"interleaved-1f1b-recompute", ScheduleKind::kInterleaved1F1BRecompute},
    {"interleaved", ScheduleKind::kInterleaved1F1B},
    {"pipedream-flush", ScheduleKind::k1F1B},
    {"2bw", ScheduleKind::kPipeDream2BW},
}};
constexpr std::size_t kNumKinds = 7;  // the canonical names come first

Instruction make(InstructionKind kind, int stage, int microbatch, int chunk = 0) {
  return Instruction{kind, stage, microbatch, chunk};
}

// docs/solver.md, "Schedules", 1F1B: step k of 2(M+S-1) steps emits at most one
// instruction per stage.
std::vector<Instruction> one_f_one_b_stage(int S, int M, int s) {
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(M));
  const int steps = 2 * (M + S - 1);
  for (int k = 0; k < steps; ++k) {
    const bool k_even = k % 2 == 0;
    const bool s_even = s % 2 == 0;
    const bool forward = k_even == s_even;
    int m = 0;
    if (k_even && s_even) m = k / 2 - s / 2;
    else if (!k_even && !s_even) m = (k - 1) / 2 - s / 2;
    else if (k_even && !s_even) m = k / 2 - S + (s + 1) / 2;
    else m = (k - 1) / 2 - S + 1 + s / 2;
    if (m < 0 || m >= M) continue;
    order.push_back(make(forward ? InstructionKind::kForward : InstructionKind::kBackward, s, m));
  }
  return order;
}

std::vector<Instruction> gpipe_stage(int M, int s) {
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(M));
  for (int m = 0; m < M; ++m) order.push_back(make(InstructionKind::kForward, s, m));
  for (int m = 0; m < M; ++m) order.push_back(make(InstructionKind::kBackward, s, m));
  return order;
}

// Megatron-LM's interleaved schedule (forward_backward_pipelining_with_interleaving) on
// device r: virtual microbatch k in [0, M*v) names a (chunk, microbatch) pair.
std::vector<Instruction> interleaved_stage(int S, int M, int v, int r) {
  const int total = M * v;
  const int group = S * v;
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / S;
    return forward ? c : v - 1 - c;
  };
  auto microbatch_of = [&](int k) { return (k / group) * S + k % S; };
  auto forward = [&](int k) { return make(InstructionKind::kForward, r, microbatch_of(k), chunk_of(k, true)); };
  auto backward = [&](int k) { return make(InstructionKind::kBackward, r, microbatch_of(k), chunk_of(k, false)); };

  const int warmup = M == S ? total : std::min((S - r - 1) * 2 + (v - 1) * S, total);
  const int steady = total - warmup;
  std::vector<Instruction> order;
  order.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) order.push_back(forward(k));
  for (int i = 0; i < steady; ++i) {
    order.push_back(forward(warmup + i));
    order.push_back(backward(i));
  }
  for (int k = steady; k < total; ++k) order.push_back(backward(k));
  return order;
}

// Every backward is immediately preceded by its forward's recomputation. It is uniform on
// all stages (the last stage could skip it, since it runs B right after F, but profiles
// measure recomputation per stage and a uniform rule keeps plans comparable). R depends
// only on program order, so it runs while the device would otherwise wait for the gradient.
void insert_recomputation(std::vector<Instruction>& order) {
  std::vector<Instruction> out;
  out.reserve(order.size() * 3 / 2);
  for (const Instruction& ins : order) {
    if (ins.kind == InstructionKind::kBackward) {
      out.push_back(make(InstructionKind::kRecompute, ins.stage, ins.microbatch, ins.chunk));
    }
    out.push_back(ins);
  }
  order = std::move(out);
}

// A load of microbatch m right before its first forward (stage 0, chunk 0).
void insert_loads(std::vector<Instruction>& stage0) {
  std::vector<Instruction> out;
  out.reserve(stage0.size() * 2);
  for (const Instruction& ins : stage0) {
    if (ins.kind == InstructionKind::kForward && ins.chunk == 0) {
      out.push_back(make(InstructionKind::kLoad, ins.stage, ins.microbatch, 0));
    }
    out.push_back(ins);
  }
  stage0 = std::move(out);
}

}  // namespace

void validate_schedule(const ScheduleSpec& spec) {
  const std::string where = "schedule " + std::string(to_string(spec.kind)) + ": ";
  if (spec.kind == ScheduleKind::kPipeDream || spec.kind == ScheduleKind::kPipeDream2BW) {
    throw InputError(where + "asynchronous (no flush), so it has no flushed iteration to build; the planner "
                             "solves it on a steady-state window (perseus plan --schedule " +
                     std::string(to_string(spec.kind)) + ")");
  }
  if (spec.stages < 1 || spec.stages > limits::kMaxStages) {
    throw InputError(where + "the number of stages must be 1.." + std::to_string(limits::kMaxStages) + ", got " +
                     std::to_string(spec.stages));
  }
  if (spec.microbatches < 1 || spec.microbatches > limits::kMaxMicrobatches) {
    throw InputError(where + "the number of microbatches must be 1.." + std::to_string(limits::kMaxMicrobatches) +
                     ", got " + std::to_string(spec.microbatches));
  }
  if (spec.chunks < 1 || spec.chunks > limits::kMaxChunks) {
    throw InputError(where + "the number of model chunks per device must be 1.." + std::to_string(limits::kMaxChunks) +
                     ", got " + std::to_string(spec.chunks));
  }
  if (spec.chunks > 1 && !is_interleaved(spec.kind)) {
    throw InputError(where + std::to_string(spec.chunks) +
                     " model chunks per device need the interleaved-1f1b schedule");
  }
  if (is_interleaved(spec.kind) && spec.microbatches % spec.stages != 0) {
    throw InputError(where + "the number of microbatches (" + std::to_string(spec.microbatches) +
                     ") must be a multiple of the number of stages (" + std::to_string(spec.stages) + ")");
  }
  // Memory and time grow with the instructions: at most 3 per (virtual stage, microbatch)
  // (forward, backward, recompute) plus loads.
  const std::int64_t instructions = 3 * static_cast<std::int64_t>(spec.stages) * spec.chunks * spec.microbatches +
                                    spec.microbatches;
  if (instructions > limits::kMaxInstructions) {
    throw InputError(where + "too large: " + std::to_string(spec.stages) + " stages x " +
                     std::to_string(spec.chunks) + " chunks x " + std::to_string(spec.microbatches) +
                     " microbatches may take up to " + std::to_string(instructions) + " instructions, more than the " +
                     std::to_string(limits::kMaxInstructions) + " perseus plans for");
  }
}

std::string_view to_string(ScheduleKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "unknown";
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const KindName& entry : kKindNames) {
    if (entry.name == lower) return entry.kind;
  }
  std::string known, aliases;
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    std::string& list = i < kNumKinds ? known : aliases;
    if (!list.empty()) list += ", ";
    list += kKindNames[i].name;
  }
  throw InputError("unknown schedule '" + std::string(name) + "'; known schedules: " + known + " (aliases: " +
                   aliases + ")");
}

std::size_t Schedule::num_instructions() const {
  std::size_t total = 0;
  for (const auto& stage : per_stage) total += stage.size();
  return total;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  validate_schedule(spec);
  const int S = spec.stages;
  const int M = spec.microbatches;
  Schedule schedule{spec, {}};
  schedule.per_stage.resize(S);
  for (int s = 0; s < S; ++s) {
    std::vector<Instruction>& order = schedule.per_stage[s];
    switch (spec.kind) {
      case ScheduleKind::k1F1B: order = one_f_one_b_stage(S, M, s); break;
      case ScheduleKind::kGPipe: order = gpipe_stage(M, s); break;
      case ScheduleKind::kInterleaved1F1B: order = interleaved_stage(S, M, spec.chunks, s); break;
      case ScheduleKind::kInterleaved1F1BRecompute:
        order = interleaved_stage(S, M, spec.chunks, s);
        insert_recomputation(order);
        break;
      case ScheduleKind::k1F1BEarlyRecompute:
        order = one_f_one_b_stage(S, M, s);
        insert_recomputation(order);
        break;
      case ScheduleKind::kPipeDream:
      case ScheduleKind::kPipeDream2BW: break;  // rejected by validate
    }
  }
  if (spec.data_load) insert_loads(schedule.per_stage[0]);
  return schedule;
}

}  // namespace perseus
