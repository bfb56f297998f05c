// The sizes perseus accepts, checked before any work that grows with them: a typo such as
// `--stages 100000` or one profile row for stage 100000 is refused at once, naming the limit,
// instead of building a DAG for minutes. Each limit is far beyond real training (pipelines
// have tens of stages, iterations hundreds to a few thousand microbatches) and keeps memory
// bounded by the input.
#pragma once

#include <cstdint>

namespace perseus::limits {

inline constexpr int kMaxStages = 1024;                  // pipeline stages (devices of one pipeline)
inline constexpr int kMaxChunks = 64;                    // model chunks per device (interleaved 1F1B)
inline constexpr int kMaxMicrobatches = 65536;           // microbatches per iteration
inline constexpr std::int64_t kMaxInstructions = 1 << 21;  // instructions of one iteration's DAG (~2 M)
inline constexpr std::int64_t kMaxProfileRows = 10'000'000;  // rows of one profile CSV
inline constexpr int kMaxFrequencyMhz = 100'000;         // a clock; GPUs run at a few thousand MHz
inline constexpr double kMinTimeS = 1e-9;                // one measured instruction: at least a nanosecond
inline constexpr double kMaxTimeS = 1e6;                 // ... and under twelve days
inline constexpr double kMaxEnergyJ = 1e12;              // one measured instruction's energy
// Devices (pipelines x stages) of one emulated cluster: 2,097,152 is 262,144 pipelines of 8
// stages, 16.7 M GPUs at tensor parallelism 8; memory grows with the devices.
inline constexpr std::int64_t kMaxEmulatedDevices = 1 << 21;
inline constexpr int kMaxTensorParallel = 1024;

}  // namespace perseus::limits
