#include "perseus/model/instruction.hpp"

#include <array>

namespace perseus {
namespace {
constexpr std::array<std::string_view, 5> kNames = {"forward", "backward", "recompute", "load",
                                                    "communication"};
}  // namespace

std::string_view to_string(InstructionKind kind) { return kNames[static_cast<std::size_t>(kind)]; }

std::optional<InstructionKind> parse_instruction_kind(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<InstructionKind>(i);
  }
  return std::nullopt;
}

std::string label(const Instruction& instruction) {
  static constexpr std::array<char, 5> kLetters = {'F', 'B', 'R', 'L', 'C'};
  std::string out(1, kLetters[static_cast<std::size_t>(instruction.kind)]);
  out += std::to_string(instruction.microbatch);
  if (instruction.chunk > 0) {
    out += '.';
    out += std::to_string(instruction.chunk);
  }
  return out;
}

}  // namespace perseus
