// The pictures: the frontier plot (Perseus against the baselines, time vs energy) and the
// pipeline timeline drawn to scale (the Perseus paper's Figure 1), both as standalone SVG.
#pragma once

#include <string>

#include "perseus/emulator/comparison.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::report {

struct FrontierPlotOptions {
  std::string title = "Iteration time vs energy";
  double width = 820;
  double height = 460;
};

// Every method's emulated points (Pareto-optimal ones joined by a line), AllMax and EnvPipe
// as single markers, T_min and T* as vertical lines, and under Perseus's line the proven
// lower bound at each of its plans' times (dashed, "series lower-bound"). Elements carry
// classes ("series perseus", "point zeus-global", "marker t-min", ...) and <title> tooltips.
std::string frontier_svg(const Comparison& comparison, const FrontierPlotOptions& options = {});

struct TimelinePlotOptions {
  std::string title;
  int pipeline = 0;
  double width = 1000;        // of the drawing area, px; the time axis spans it
  double row_height = 30;
  bool critical_path = true;  // trace it as a line through the critical instructions
  // Colour scale range, W per GPU; both 0: the range of the drawn instructions' power.
  double power_lo_w = 0.0;
  double power_hi_w = 0.0;
  double time_hi_s = 0.0;     // end of the time axis; 0: this pipeline's iteration time
};

// One row per stage, one rectangle per instruction at its emulated start and duration,
// filled by its power (idle time is the row's background at p_blocking), labelled F/B/R/L
// with the microbatch where it fits; instructions whose clock switch came late are outlined.
// Throws InputError for a pipeline the result does not have or kept no timeline of.
std::string timeline_svg(const EmulationResult& result, const TimelinePlotOptions& options = {});

}  // namespace perseus::report
