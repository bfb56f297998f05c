// Leave-one-out check of the prediction against measured runs: each run is predicted from a
// profile and an energy model built from the other runs only, then compared with what it
// measured (iteration time of the slowest rank, energy of all GPUs).
//
// Time: the emulator's iteration (emulator/emulator.hpp) on the 1F1B schedule of the runs' shape,
// one pipeline, with
//   - instruction times from the profile at the run's clocks (median over other runs; a clock
//     not measured elsewhere is interpolated linearly in the clock between its neighbours);
//   - data loading (switch `data_loading`: IterationOverheads' first- and last-stage loads,
//     per microbatch = median over other runs; the last stage's two loads together);
//   - the remainder (switch `remainder`): measured iteration time minus the emulated time of the
//     run's own measured instruction times (and loads, when that term is on: otherwise the
//     remainder holds them); its median over the other runs is added as time between
//     iterations. It holds what the dumps do not break down: optimizer step, point-to-point
//     transfers, the gap between iterations.
// Energy (switch `energy_model`): per stage, a least-squares fit over the other runs of
//   E_rank = sum_instr (a_kind + b_kind * f) * t  +  p_block * (T - busy)
// (f the clock in GHz, t each measured duration, T the iteration time, busy the sum of t):
// power linear in the clock per instruction kind while computing, a constant power while
// blocked (loading, waiting, communicating, the optimizer step). The blocked power is given
// (83.64 W, the A100's) unless asked to be fitted: fitted, it is nearly collinear with the
// compute terms and extrapolates badly to plans faster than the others.
#pragma once

#include <functional>
#include <vector>

#include "perseus/runs/runs.hpp"

namespace perseus::runs {

struct ValidateOptions {
  bool data_loading = true;
  bool remainder = true;
  // W while blocked; negative: fitted with the other coefficients. The default is the A100's
  // (as `--p-blocking` elsewhere).
  double blocked_power_w = 83.64;
};

// Per stage: W at the clock f (GHz) while computing a forward / backward; W while blocked.
struct StagePower {
  double forward_a = 0.0, forward_b = 0.0;
  double backward_a = 0.0, backward_b = 0.0;
  double blocked_w = 0.0;
  double forward_w(int clock_mhz) const { return forward_a + forward_b * clock_mhz / 1000.0; }
  double backward_w(int clock_mhz) const { return backward_a + backward_b * clock_mhz / 1000.0; }
};

struct EnergyFit {
  std::vector<StagePower> stages;
  double rms_residual = 0.0;  // relative, over the fitted (stage, run) rows
};

// Fits the energy model on every run but `exclude` (-1: all); `blocked_w` as in ValidateOptions.
EnergyFit fit_energy(const RunTable& table, int exclude, double blocked_w = 83.64);

// The profile of every run but `exclude`: time_profile with each entry's energy the fitted
// power of its (stage, kind) at its clock times its time.
std::vector<ProfileEntry> profile_with_energy(const RunTable& table, int exclude, double blocked_w = 83.64);

struct RunPrediction {
  int id = 0;
  bool uniform_clock = false;
  double measured_time_s = 0.0, predicted_time_s = 0.0;
  double measured_energy_j = 0.0, predicted_energy_j = 0.0;
  double critical_path_s = 0.0;  // of the predicted instruction times (and loads, when on)
  double remainder_s = 0.0;      // added to it
  double time_error() const { return predicted_time_s / measured_time_s - 1.0; }
  double energy_error() const { return predicted_energy_j / measured_energy_j - 1.0; }
};

struct Validation {
  ValidateOptions options;
  std::vector<RunPrediction> runs;
  double median_time_error = 0.0, worst_time_error = 0.0;  // of |error|
  double median_energy_error = 0.0, worst_energy_error = 0.0;
  double median_fit_residual = 0.0;  // of the leave-one-out energy fits
};

// `progress(done, total)` after each run predicted.
Validation validate(const RunTable& table, const ValidateOptions& options,
                    const std::function<void(int, int)>& progress = {});

}  // namespace perseus::runs
