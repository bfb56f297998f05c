// The server's scheduler setting (ZEUS_PFO_SCHEDULER and ZEUS_PFO_SCHEDULER_ARGS), read and
// checked once at start-up.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "perseus/model/frequencies.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/schedulers.hpp"

namespace perseus::server {

// How jobs are scheduled, as ZEUS_PFO_SCHEDULER / ZEUS_PFO_SCHEDULER_ARGS give it.
//   PointSolution   {"solution_path": "freqs_pipeline_00042.py"}: serve that plan; or
//                   {"solution_path": "FRONTIER_DIR", "plan": ROW} / {..., "deadline_s": S}:
//                   serve that row of a `perseus optimize` directory's plans.bin, or the
//                   plan for T_opt = min(T*, S).
//   InVivoProfiling {"p_blocking": W, "unit_time": s, "schedule": "1f1b", "microbatches": M,
//                    "chunks": v, "max_energy_rises": 5, "iterations_per_frequency": 2}:
//                   profile every clock, highest to lowest, then compute the frontier and
//                   serve T_min.
//   Frontier        {"schedule", "microbatches", "chunks", "unit_time"}: run at the highest
//                   clock until the job uploads a profile, then compute and serve T_min.
struct SchedulerConfig {
  std::string name = "Frontier";
  std::optional<PipelineLayout> layout;  // the default for jobs that do not send theirs
  PipelineFrequencies point_plan;           // PointSolution
  std::string point_plan_path;
  std::optional<double> p_blocking;      // InVivoProfiling (required), Frontier uploads (default)
  double unit_time = 0.001;
  ProfilingSettings profiling;
};

// Validates the name and the arguments (reading the PointSolution plan as data); throws
// InputError naming the setting and what is wrong.
SchedulerConfig parse_scheduler_config(const std::string& name, const nlohmann::json& args);

}  // namespace perseus::server
