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
//                   plan for T_opt = min(T*, S). As in zeus, a plan with one list per rank
//                   gives rank r list r; one with a list per stage gives each rank its stage's.
//   PointSolution3D the same arguments; as in zeus, the plan has one list per stage and
//                   every rank (any dp_rank, tp_rank) runs its stage's list.
//   InVivoProfiling {"p_blocking": W, "unit_time": s, "schedule": "1f1b", "microbatches": M,
//                    "chunks": v, "max_energy_rises": 5, "iterations_per_frequency": 2}:
//                   profile every clock, highest to lowest, then compute the frontier and
//                   serve T_min.
//   Frontier        {"schedule", "microbatches", "chunks", "unit_time"}: run at the highest
//                   clock until the job uploads a profile, then compute and serve T_min.
struct SchedulerConfig {
  std::string name = "Frontier";
  // PointSolution or PointSolution3D: a fixed plan, point_plan.
  bool serves_point_plan() const;
  std::optional<PipelineLayout> layout;  // the default for jobs that do not send theirs
  PipelineFrequencies point_plan;           // PointSolution
  std::string point_plan_path;
  std::optional<double> p_blocking;      // InVivoProfiling (required), Frontier uploads (default)
  double unit_time = 0.001;
  ProfilingSettings profiling;
  // Frontier and InVivoProfiling: seconds of the exact MILP at iso-time when a job's frontier
  // is computed (FrontierOptions::exact_iso_seconds; 0: none, at most 600). The job gets its
  // plans that much later, and a shutdown or a new profile waits for it.
  double exact_seconds = 0.0;
};

// Validates the name and the arguments (reading the PointSolution plan as data); throws
// InputError naming the setting and what is wrong. Numbers may be given as pydantic reads
// them: "4" and 4.0 for an integer, "83.64" for a number.
SchedulerConfig parse_scheduler_config(const std::string& name, const nlohmann::json& args);

// Whose list each list of the fixed plan is, for a job of these degrees: PointSolution takes
// one list per rank (zeus's reading) or, a perseus extension, one per stage; PointSolution3D
// one per stage. ApiError 422 naming the plan and the job's degrees when neither fits.
PlanLists point_plan_lists(const SchedulerConfig& config, int pp_degree, int world_size);

}  // namespace perseus::server
