// From measured options to what the solver needs per operation: Pareto-filtered,
// quantised options and a fitted exponential cost model of effective energy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {

// cost(q) = a * exp(b * q) + c, q in units of the unit time.
struct ExpCost {
  double a = 0.0;
  double b = 0.0;
  double c = 0.0;
  double operator()(double q) const;
};

// One surviving option of an operation.
struct Option {
  Measurement measurement;
  std::int64_t q = 0;             // quantised time, units of unit_time
  double effective_energy = 0.0;  // energy - p_blocking * q * unit_time
  // Kept by the reference's filter: the crawl quantises, fits and plans with these only.
  // The others are kept for the plans on measured data because no faster option uses less
  // effective energy (energy - p_blocking * time): typically slow clocks that cost more
  // energy in total but less than blocking for the time they add.
  bool reference = true;
};

// Everything the solver knows about one (stage, instruction) operation.
struct OperationOptions {
  int stage = 0;
  InstructionKind kind = InstructionKind::kForward;
  // Every option worth running, slowest first: the reference's options (Pareto-optimal in
  // time and energy, one per q) and those Pareto-optimal in time and effective energy. An
  // option outside both is never worth running: a faster one costs less above idling.
  std::vector<Option> options;
  // The measurement at the highest clock (the fastest of them on a tie), whether or not the
  // filter kept it: what running "all-max", the default way training runs, takes.
  Measurement highest_clock;
  ExpCost cost;                 // fitted (or overridden) model of effective energy vs q
  bool cost_overridden = false;
  double fit_mse = 0.0;         // mean squared error of the fit on the reference options

  // The crawl's view, over the reference options: its q range, whether it is a constant-time
  // operation (one option), and the option it runs for a planned duration d: the slowest
  // reference option with q <= d (the fastest when d is below all of them).
  std::int64_t min_q() const;
  std::int64_t max_q() const;
  bool is_constant() const { return num_reference_options() == 1; }
  std::size_t num_reference_options() const;
  std::size_t option_for_duration(std::int64_t d) const;
  // cost(d): the fitted (or overridden) effective energy at duration d. A constant
  // operation's cost is {0, 0, its option's effective energy} unless overridden.
  double fitted_cost(std::int64_t d) const;

  // The options either side of a planned duration (seconds), for plans rounded from a
  // relaxation's durations: `down` is the slowest option that fits within it (the fastest
  // when none does), `up` the fastest that is no faster (the slowest when none is). Times
  // within `tolerance_s` of the duration count as equal to it; among options of one time, the
  // first. Precondition: `options` slowest first, as built. O(log options).
  struct Bracket {
    std::int32_t down = 0;
    std::int32_t up = 0;
  };
  Bracket bracket(double duration_s, double tolerance_s = 0.0) const;
  // bracket(duration_s, tolerance_s).down alone (bracket's own), in one binary search (two
  // where no option fits), for plans rounded down only: a third of bracket's searches.
  // O(log options).
  std::int32_t round_down(double duration_s, double tolerance_s = 0.0) const;
};

// A corner of an operation's lower convex hull in (time, effective energy).
struct HullPoint {
  double time_s = 0.0;
  double effective_j = 0.0;  // energy - p_blocking * time
};

// The lower convex hull of an operation's options in (time, energy - p_blocking * time),
// fastest first and decreasing in energy: a slower option that costs more than a faster one
// is never worth its time, so the hull stops at the cheapest option. Where `time_unit_s` > 0,
// times are first rounded to whole units (at least one), as a crawl in those units sees
// them; of options that round to one time the cheaper is kept. O(k log k) for k options.
std::vector<HullPoint> effective_energy_hull(const OperationOptions& operation, double p_blocking,
                                             double time_unit_s = 0.0);

// The options at the corners of effective_energy_hull(operation, p_blocking) (no time unit),
// fastest first; of options at one corner's time, the one of least effective energy (the
// first of equal ones). Plans made of these use time at the hull's rates: on the A40
// profiles the clocks just below the highest save little energy for the time they take, and
// plans rounded to the corners leave such time to operations that save more with it.
// O(k log k + k * corners) for k options.
std::vector<std::int32_t> hull_corner_options(const OperationOptions& operation, double p_blocking);

// The time quantum when a user gives none: the reference's for A100 profiles. (Its A40 runs
// used 0.1 ms; a finer unit gives more crawl steps, each a point of the frontier.)
inline constexpr double kDefaultUnitTime = 0.001;

struct OptionsConfig {
  double unit_time = kDefaultUnitTime;  // tau, seconds
  double p_blocking = 0.0;   // W
  // Coefficients that replace the fit, keyed by (stage, instruction).
  std::map<std::pair<int, InstructionKind>, ExpCost> overrides;
  // Fit cost(q) at all: only the crawl uses the fits. Running given plans (the emulator) needs
  // the measured options alone, so a profile whose options admit no fit still runs; without
  // fits every cost is the constant of its cheapest option.
  bool fit_costs = true;
};

struct Warning {
  std::string message;
};

// Reads overrides from a CSV with header `instruction,stage,...,a,b,c` (the reference's
// fit file format; other columns ignored). Throws InputError.
std::map<std::pair<int, InstructionKind>, ExpCost> read_cost_overrides(
    const std::filesystem::path& path);

// Python's float floor division (a // b), which the reference uses to quantise.
double python_floordiv(double a, double b);

// Builds the options of every operation in `profile`. Throws InputError for bad
// configuration (non-positive unit time or p_blocking, all options collapsing to one
// duration) and SolveError for a fit that cannot be made; appends warnings for
// suspicious but usable data (non-convex measurements, poor fits).
std::vector<OperationOptions> build_operation_options(const Profile& profile,
                                                      const OptionsConfig& config,
                                                      std::vector<Warning>* warnings);

}  // namespace perseus
