// Reading measured per-knob time/energy profiles (the Perseus profile CSV).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/instruction.hpp"

namespace perseus {

// One measured option of one operation: running it with `knob` took `time_s` seconds
// and `energy_j` Joules. `knob` is an opaque label ("1410", or "1410|attention_configs=3"
// when the profile carries extra knob columns); `frequency_mhz` is its SM clock.
struct Measurement {
  std::string knob;
  int frequency_mhz = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  int line = 0;  // 1-based line in the source file, for error messages
};

// Every measured option of one (stage, instruction) pair.
struct OperationProfile {
  int stage = 0;
  InstructionKind kind = InstructionKind::kForward;
  std::vector<Measurement> measurements;  // in file order
};

// A whole profile. Rows of several ranks of the same stage (rank columns present) are
// aggregated as the maximum time and the sum of energy, as the server does.
class Profile {
 public:
  // Throws InputError naming file, line, field and what was expected.
  static Profile read_csv(const std::filesystem::path& path);
  static Profile parse_csv(std::string_view text, std::string source_name);

  const std::string& source() const { return source_; }
  int num_stages() const { return num_stages_; }
  // Sorted by (stage, kind).
  const std::vector<OperationProfile>& operations() const { return operations_; }
  // nullptr when the profile has no rows for that pair.
  const OperationProfile* find(int stage, InstructionKind kind) const;

  // Throws InputError if any stage in [0, stages) lacks forward or backward rows,
  // or the profile has stages >= `stages`.
  void validate_for(int stages) const;

 private:
  std::string source_;
  int num_stages_ = 0;
  std::vector<OperationProfile> operations_;
};

}  // namespace perseus
