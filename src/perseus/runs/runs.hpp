// Measured runs as the zeus pipeline-frequency server dumps them: for run i of a folder,
// `i.sched.json` (per rank, `power_states`: the clock of every instruction in execution order)
// and `i.prof.json` (per rank, a zeus ProfilingResult: iteration time and energy, and the
// duration of every load/forward/backward of each measured iteration).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "perseus/profile/profile.hpp"

namespace perseus::runs {

// One instruction of a stage's 1F1B order.
struct Step {
  bool forward = true;
  int microbatch = 0;
};

// The 1F1B order of `stage`: min(stages - stage - 1, microbatches) forwards, then one forward
// and one backward alternately, then the remaining backwards.
std::vector<Step> one_f_one_b(int stage, int stages, int microbatches);

// One rank (= stage: dp 1, tp 1) of one run. Durations are medians over the measured iterations
// after the first (the first includes warm-up and one more forward/backward); with a single
// iteration that one is used.
struct RankRun {
  int rank = 0;
  std::size_t power_states = 0;  // entries in the dump (516-520 here)
  std::vector<int> states;       // the dump's power_states
  std::vector<int> clocks;       // MHz, one per instruction of one_f_one_b(rank, ...): states[2k + clock_offset]
  int clock_offset = 0;          // calibrated per rank over the folder's runs (import_runs)
  std::vector<double> forward_s;   // per microbatch
  std::vector<double> backward_s;  // per microbatch
  double load_s = 0.0;             // data loading per iteration (all loads summed)
  double iter_time_s = 0.0;
  double iter_energy_j = 0.0;  // this rank's GPU
  int iterations = 0;          // measured iterations in the dump
};

struct Run {
  int id = 0;
  std::vector<RankRun> ranks;  // by rank
  double iter_time_s() const;   // the slowest rank's
  double iter_energy_j() const;  // all ranks' GPUs
  bool uniform_clock() const;    // every instruction at one clock (runs 0 and 1 here)
};

struct RunTable {
  std::filesystem::path dir;
  int stages = 0;
  int microbatches = 0;
  std::vector<Run> runs;  // by id
};

// Reads every `<i>.sched.json` with its `<i>.prof.json` in `dir`. InputError naming the file
// and the field for a missing or unreadable file, malformed JSON, or ranks and runs that
// disagree (rank count, microbatch count, too few power states).
RunTable import_runs(const std::filesystem::path& dir);

// Time per (stage, instruction, clock): the median over `runs` (all but `exclude`, -1 for none)
// of the steady microbatches' medians (the first and last microbatch run at pipeline edges and
// are left out). Energy per entry from `power_w` when given (W per stage, kind, clock), else 0.
struct ProfileEntry {
  int stage = 0;
  bool forward = true;
  int clock = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  int samples = 0;  // runs measured at that clock
};
std::vector<ProfileEntry> time_profile(const RunTable& table, int exclude);

// As a perseus::Profile (forward/backward, knob = clock), for the planner and emulator.
Profile to_profile(const std::vector<ProfileEntry>& entries, std::string source);
// The CSV of docs/formats.md: stage,instruction,frequency,time,energy.
std::string profile_csv(const std::vector<ProfileEntry>& entries);

}  // namespace perseus::runs
