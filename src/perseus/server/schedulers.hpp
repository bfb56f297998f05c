// The per-job schedulers: what every pipeline of a job runs from one barrier round on.
// PointSolution serves one fixed plan; MaxFrequency runs everything at the highest common
// clock while a profile or frontier is pending; InVivoProfiling walks the clocks from the
// highest down and assembles a profile from the ranks' results; Frontier serves the T_min
// plan and, once a straggler is announced, the T_opt = min(T*, T') plan to other pipelines.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/frequencies.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/frontier_table.hpp"

namespace perseus::server {

// Whose list each list of a plan is: a stage's (every rank of the stage runs it) or one
// global rank's (zeus's PointSolution reads a plan file so).
enum class PlanLists { kPerStage, kPerRank };

// What every pipeline runs from one round on. All ranks of a stage run the same list (unless
// the plan has one list per rank); pipelines (data-parallel replicas) holding a straggler
// run `straggling`.
struct Deployment {
  std::shared_ptr<const PipelineFrequencies> normal;
  std::shared_ptr<const PipelineFrequencies> straggling;  // null when no pipeline straggles
  std::vector<int> straggler_pipelines;                // dp ranks, ascending
  std::optional<std::size_t> frontier_index;           // the point `normal` came from (Frontier)
  std::string label;                                   // for logs and the web page
  // Each stage's list as JSON text ([["forward",1410],...]), made once by prepare() so that
  // the ranks of a round (a thousand of them) only copy it.
  std::vector<std::string> normal_json;
  std::vector<std::string> straggling_json;
  PlanLists lists = PlanLists::kPerStage;  // how a rank finds its list

  // Throws ApiError 409 when the plan has no list for the rank's stage (or the rank).
  const StageFrequencies& for_rank(const RankInfo& rank) const;
  void prepare();
  // The FrequencySchedule answer for `rank`, byte for byte what frequency_schedule_json
  // dumps. ApiError 409 as for_rank.
  std::string schedule_body(const RankInfo& rank) const;

 private:
  bool straggles(const RankInfo& rank) const;
  // The index of the rank's list: its pp_rank, or its global rank.
  std::size_t list_index(const RankInfo& rank) const;
};

// What a scheduler may look at: the job and its registered ranks.
struct JobView {
  const JobInfo& info;
  const std::map<int, RankInfo>& ranks;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Called when every rank has asked for a schedule. Throws ApiError when it cannot serve.
  virtual Deployment next_round(const JobView& job, double now) = 0;
  // Returns true when the result changed state worth persisting.
  virtual bool on_result(const JobView& job, const ProfilingResult& result) { return false; }
  // The state to persist (restored through each scheduler's constructor).
  virtual nlohmann::json state() const { return nlohmann::json::object(); }
};

// The clocks every rank supports, highest first. ApiError 409 when ranks share none.
std::vector<int> common_frequencies(const JobView& job);

class PointSolutionScheduler final : public Scheduler {
 public:
  explicit PointSolutionScheduler(PipelineFrequencies plan, PlanLists lists = PlanLists::kPerStage);
  Deployment next_round(const JobView& job, double now) override;
  PlanLists lists() const { return lists_; }

 private:
  std::shared_ptr<const PipelineFrequencies> plan_;
  PlanLists lists_;
};

// Every instruction at the highest clock all ranks support.
class MaxFrequencyScheduler final : public Scheduler {
 public:
  // `layout` may be unknown yet: rounds then fail with 409 saying how to give it.
  MaxFrequencyScheduler(std::optional<PipelineLayout> layout, std::string label);
  Deployment next_round(const JobView& job, double now) override;

 private:
  std::optional<PipelineLayout> layout_;
  std::string label_;
};

struct ProfilingSettings {
  int max_energy_rises = 5;  // stop lowering once energy rose more than this many times in a row
  // Iterations every rank measures at each clock before the next (a result may carry
  // several iterations; results accumulate over rounds until each rank has this many).
  int iterations_per_frequency = 2;
};

class InVivoProfilingScheduler final : public Scheduler {
 public:
  // `saved` is a previous state() or null for a fresh start.
  InVivoProfilingScheduler(PipelineLayout layout, ProfilingSettings settings, const nlohmann::json& saved);
  Deployment next_round(const JobView& job, double now) override;
  bool on_result(const JobView& job, const ProfilingResult& result) override;
  nlohmann::json state() const override;

  bool done() const { return done_; }
  const std::string& stop_reason() const { return stop_reason_; }
  // The clock being measured now; nullopt before the first round.
  std::optional<int> current_frequency() const;
  std::size_t frequencies_done() const { return round_energy_.size(); }
  std::size_t frequencies_total() const { return frequencies_.size(); }
  // What was measured so far as a profile. Per stage: the time of the slowest of the stage's
  // ranks; the energy of one pipeline's stage, i.e. summed over its tensor-parallel ranks and
  // averaged over the data-parallel replicas (every replica runs the same plan, and the
  // frontier is a pipeline's).
  Profile profile(const std::string& source) const;

 private:
  // What one rank reported at the clock being measured, summed over its results.
  struct RankSummary {
    struct Sums {
      double time = 0.0, energy = 0.0;
      std::size_t times = 0, energies = 0;
    };
    std::map<InstructionKind, Sums> per_instruction;
    double iteration_energy = 0.0;  // sum over iterations
    std::size_t iterations = 0;
  };
  void finish_frequency(const JobView& job);

  PipelineLayout layout_;
  ProfilingSettings settings_;
  std::vector<int> frequencies_;  // fixed at the first round, highest first
  std::size_t index_ = 0;         // into frequencies_
  std::map<int, RankSummary> reports_;  // this frequency's reports, by rank
  // (stage, instruction) -> measurements, one per finished frequency
  std::map<std::pair<int, InstructionKind>, std::vector<Measurement>> measured_;
  std::vector<double> round_energy_;  // the job's iteration energy at each finished frequency
  int rises_ = 0;
  bool done_ = false;
  std::string stop_reason_;
};

struct StragglerState {
  int id = 0;        // the straggling rank
  int pipeline = 0;  // its dp_rank
  double degree = 1.0;
  double effective_at = 0.0;  // wall clock, s since the epoch
  double announced_at = 0.0;
};

// What a straggler notice will deploy once it takes effect.
struct StragglerDecision {
  double t_min_s = 0.0;
  double t_prime_s = 0.0;  // the straggling pipelines' iteration time (T_min if none)
  double t_opt_s = 0.0;    // min(T*, T')
  std::size_t frontier_index = 0;
  double plan_time_s = 0.0;
  double plan_energy_j = 0.0;
};

class FrontierScheduler final : public Scheduler {
 public:
  FrontierScheduler(std::shared_ptr<const FrontierTable> table, std::vector<StragglerState> stragglers);
  Deployment next_round(const JobView& job, double now) override;
  nlohmann::json state() const override;

  // Records a notice and prepares (builds and caches) the plan it will deploy.
  StragglerDecision announce(const StragglerState& notice);
  // The plan in force at `now`: T' from the stragglers then active.
  StragglerDecision decide(double now) const;
  const std::vector<StragglerState>& stragglers() const { return stragglers_; }
  const std::shared_ptr<const FrontierTable>& table() const { return table_; }

  static std::vector<StragglerState> stragglers_from_json(const nlohmann::json& saved);

 private:
  // The active degree of every straggling rank at `now` (degree 1 entries dropped).
  std::map<int, const StragglerState*> active_at(double now) const;
  StragglerDecision decision_for(double t_prime) const;

  std::shared_ptr<const FrontierTable> table_;
  std::vector<StragglerState> stragglers_;  // notices in arrival order
};

}  // namespace perseus::server
