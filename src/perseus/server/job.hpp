// A job's lifecycle: the phase it is in and the scheduler that serves its rounds there,
// which change only together, through named transitions:
//   waiting    a registered job (the constructor), until a profile is uploaded;
//   point      serve_point: PointSolution's fixed plan;
//   profiling  start_profiling: in-vivo profiling;
//   computing  start_computing: a profile was uploaded (in any phase but point) or measured;
//   frontier   frontier_ready: the computation of the latest profile ended;
//   failed     frontier_failed, or fail in any phase.
// restore() rebuilds the lifecycle a restart finds in the database. The service guards a
// lifecycle with its job's mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/frequencies.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/frontier_table.hpp"
#include "perseus/server/schedulers.hpp"

namespace perseus::server {

enum class JobPhase {
  kPoint,      // PointSolution: one fixed plan, for good
  kWaiting,    // the highest clock until a profile is uploaded
  kProfiling,  // in-vivo profiling: one clock per round, highest first
  kComputing,  // the highest clock while the latest profile's frontier is computed
  kFrontier,   // plans from the frontier (T_min, or T_opt once a straggler is announced)
  kFailed,     // the highest clock for good; the lifecycle's error() says why
};

// The names the stored state and every JSON answer carry ("point", "waiting", ...).
std::string_view to_string(JobPhase phase);
std::optional<JobPhase> parse_job_phase(std::string_view name);

// The stored form of a plan: per stage, [[instruction, MHz], ...].
nlohmann::json plan_json(const PipelineFrequencies& plan);
PipelineFrequencies plan_from_json(const nlohmann::json& stages);

class JobLifecycle {
 public:
  // A registered job waiting for a profile at the highest clock. With no layout its rounds
  // fail (409 saying how to give one) until a profile brings it.
  explicit JobLifecycle(std::optional<PipelineLayout> layout = std::nullopt);

  // ---- transitions ----

  // PointSolution (and PointSolution3D): `plan` in every round, a list per stage or per rank.
  void serve_point(PipelineFrequencies plan, PlanLists lists = PlanLists::kPerStage);
  // InVivoProfiling from its first clock. InputError without a layout.
  void start_profiling(const ProfilingSettings& settings);
  // A new profile, for `layout`: the highest clock while its frontier is computed. The
  // profile version moves on (a computation of an older profile is dropped when it ends),
  // attempts count from 0 again, and a previous failure gives way to the profile's warnings.
  void start_computing(PipelineLayout layout, std::vector<std::string> warnings);
  // The current profile's frontier, computed in `seconds`.
  void frontier_ready(std::shared_ptr<const FrontierTable> table, double seconds);
  // The current profile's frontier cannot be computed: failed for good, not retried.
  void frontier_failed(std::string_view why);
  // The highest clock for good. `error` says why; `what_failed` ("profiling", "frontier",
  // "recovery") names the step in the deployment's label.
  void fail(std::string error, std::string_view what_failed);
  // On a new lifecycle: the one `state` (a state_json()) describes. `has_profile`: a profile is stored, so
  // a frontier that is missing is computed again; `stored_frontier` rebuilds the stored
  // frontier (null when there is none or it does not fit), called only in the frontier phase.
  // Throws on a state it cannot read; the fields read before stay, so that fail() keeps them.
  void restore(const nlohmann::json& state, const ProfilingSettings& settings, bool has_profile,
               const std::function<std::shared_ptr<const FrontierTable>()>& stored_frontier);

  // A computation of the current profile starts: its attempt number, from 1. Counted (and
  // persisted by the service) before it runs, so that a restart sees how many never ended.
  int start_compute_attempt() { return ++compute_attempts_; }
  // That attempt was cut short by a shutdown, not a crash: it does not count.
  void forget_compute_attempt() { --compute_attempts_; }

  // ---- state ----

  JobPhase phase() const { return phase_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  // The scheduler as what its phase makes it; null in any other phase.
  InVivoProfilingScheduler* profiling();
  const InVivoProfilingScheduler* profiling() const;
  FrontierScheduler* frontier();
  const FrontierScheduler* frontier() const;

  const std::optional<PipelineLayout>& layout() const { return layout_; }
  const std::string& error() const { return error_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Why in-vivo profiling stopped; "" until it has.
  const std::string& profiling_stop_reason() const { return profiling_stop_reason_; }
  double frontier_seconds() const { return frontier_seconds_; }
  std::uint64_t profile_version() const { return profile_version_; }
  int compute_attempts() const { return compute_attempts_; }

  // What restore() reads back: everything but the barrier's round, which the service adds.
  nlohmann::json state_json() const;

 private:
  void enter(JobPhase phase, std::unique_ptr<Scheduler> scheduler);
  void enter_highest_clock(JobPhase phase, std::string label);

  JobPhase phase_ = JobPhase::kWaiting;
  std::unique_ptr<Scheduler> scheduler_;  // never null; its kind follows phase_
  std::optional<PipelineLayout> layout_;
  PipelineFrequencies point_plan_;  // the point phase's plan, persisted with the state
  PlanLists point_plan_lists_ = PlanLists::kPerStage;
  std::string error_;
  std::vector<std::string> warnings_;
  std::string profiling_stop_reason_;
  double frontier_seconds_ = 0.0;
  std::uint64_t profile_version_ = 0;  // moves on with every profile
  int compute_attempts_ = 0;           // computations of this profile started and not finished
};

}  // namespace perseus::server
