// Vocabulary shared by every module: what an instruction is (the errors the library reports
// are in errors.hpp). Nothing here depends on any other perseus module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace perseus {

// What one instruction of a pipeline schedule does.
enum class InstructionKind : std::uint8_t {
  kForward,
  kBackward,
  kRecompute,      // forward recomputation issued before a backward (activation checkpointing)
  kLoad,           // data loading: a constant-time operation
  kCommunication,  // a transfer on a link: a constant-time operation unless profiled
};

// "forward", "backward", "recompute", "load", "communication".
std::string_view to_string(InstructionKind kind);
// Inverse of to_string; nullopt for an unknown name.
std::optional<InstructionKind> parse_instruction_kind(std::string_view name);

// One instruction of one microbatch on one pipeline device. `stage` is the device's
// pipeline rank; `chunk` the model chunk it runs (interleaved schedules), so the
// virtual stage is chunk * num_stages + stage.
struct Instruction {
  InstructionKind kind = InstructionKind::kForward;
  int stage = 0;
  int microbatch = 0;
  int chunk = 0;

  friend bool operator==(const Instruction&, const Instruction&) = default;
};

// Short label such as "F3", "B0", "R2", "L1" (chunk suffix ".1" when chunk > 0).
std::string label(const Instruction& instruction);

}  // namespace perseus
