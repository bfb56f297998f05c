// A job's frontier as the server keeps it: the problem it was computed for, the Pareto
// points (time, energy, option choice), and the plans built from them on demand. Looking up
// the plan for a straggler's time is a binary search over the precomputed times.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/server/api.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus::server {

// What a frontier is computed from; persisted so that a restarted server rebuilds it.
struct FrontierInputs {
  std::string profile_csv;  // the profile, as uploaded or as assembled from profiling rounds
  std::string profile_source;
  PipelineLayout layout;
  int stages = 1;
  double p_blocking = 0.0;
  double unit_time = 0.001;
};

nlohmann::json inputs_to_json(const FrontierInputs& inputs);  // everything but the CSV
FrontierInputs inputs_from_json(const nlohmann::json& object, std::string profile_csv);

// Parses the profile and binds it to the job's schedule. Throws InputError (bad profile,
// mismatched stages, bad p_blocking or unit time) or SolveError (a fit that cannot be made).
EnergyProblem make_server_problem(const FrontierInputs& inputs, std::vector<Warning>* warnings);

// One instruction of a plan on the timeline of its stage.
struct TimelineEntry {
  InstructionKind kind = InstructionKind::kForward;
  int microbatch = 0;
  int chunk = 0;
  int frequency_mhz = 0;
  double start_s = 0.0;
  double end_s = 0.0;
};

// A frontier point made ready to serve: what each stage runs, and when.
struct ServedPlan {
  std::size_t index = 0;  // into the frontier, fastest first
  PipelineFrequencies frequencies;
  std::vector<std::vector<TimelineEntry>> timeline;
  MeasuredFigures measured;
};

// Thrown out of a computation whose `cancelled` callback answered true.
class ComputationCancelled : public std::runtime_error {
 public:
  ComputationCancelled() : std::runtime_error("frontier computation cancelled") {}
};

class FrontierTable {
 public:
  // crawl_frontier + build_frontier on `problem`; polls `cancelled` between crawl steps. With
  // exact_seconds, that many seconds of the exact MILP at iso-time too (FrontierOptions::
  // exact_iso_seconds), which is not polled: a cancellation waits for it.
  static std::shared_ptr<FrontierTable> compute(EnergyProblem problem, const std::function<bool()>& cancelled,
                                                double exact_seconds = 0.0);
  // From serialize_points() of a table computed on the same problem. Throws InputError when
  // the blob does not match the problem (wrong size, option out of range).
  static std::shared_ptr<FrontierTable> restore(EnergyProblem problem, std::string_view blob);

  // Binary layout: "PFT1", u32 points, u32 nodes, then per point f64 time, f64 energy,
  // u16 option per node (host byte order).
  std::string serialize_points() const;

  std::size_t size() const { return times_.size(); }
  const std::vector<double>& times() const { return times_; }  // ascending: T_min first, T* last
  double time(std::size_t index) const { return times_[index]; }
  double energy(std::size_t index) const { return energies_[index]; }
  const EnergyProblem& problem() const { return problem_; }
  std::size_t t_star_index() const { return times_.size() - 1; }

  // The slowest point no slower than T_opt = min(T*, deadline); nullopt if T_min is slower.
  std::optional<std::size_t> select(double deadline_s) const;
  // Builds (once, then cached) the plan of point `index`.
  std::shared_ptr<const ServedPlan> plan(std::size_t index) const;

 private:
  FrontierTable(EnergyProblem problem) : problem_(std::move(problem)) {}

  EnergyProblem problem_;
  std::vector<double> times_;
  std::vector<double> energies_;
  std::vector<std::uint16_t> choices_;  // size() rows of problem_.dag.num_nodes() options
  mutable std::mutex cache_mutex_;
  mutable std::map<std::size_t, std::shared_ptr<const ServedPlan>> cache_;
};

// The profile as CSV (stage,instruction,frequency,time,energy), exact to the last bit.
std::string profile_to_csv(const Profile& profile);

}  // namespace perseus::server
