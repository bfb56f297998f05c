// The clocks a plan sets: for each instruction of a stage, in execution order, the GPU clock
// it runs at. Shared by the plan files, the emulator, the server and the client.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace perseus {

using StageFrequencies = std::vector<std::pair<std::string, int>>;  // one stage: (instruction name, clock MHz) in execution order
using PipelineFrequencies = std::vector<StageFrequencies>;          // per stage

}  // namespace perseus
