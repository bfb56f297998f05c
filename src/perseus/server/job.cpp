#include "perseus/server/job.hpp"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<JobPhase, std::string_view>, 6> kPhaseNames = {{
    {JobPhase::kPoint, "point"},
    {JobPhase::kWaiting, "waiting"},
    {JobPhase::kProfiling, "profiling"},
    {JobPhase::kComputing, "computing"},
    {JobPhase::kFrontier, "frontier"},
    {JobPhase::kFailed, "failed"},
}};

constexpr std::string_view kWaitingLabel = "highest clock, waiting for a profile";
constexpr std::string_view kComputingLabel = "highest clock, computing the frontier";

}  // namespace

std::string_view to_string(JobPhase phase) {
  for (const auto& [value, name] : kPhaseNames) {
    if (value == phase) return name;
  }
  return "unknown";
}

std::optional<JobPhase> parse_job_phase(std::string_view name) {
  for (const auto& [value, known] : kPhaseNames) {
    if (known == name) return value;
  }
  return std::nullopt;
}

json plan_json(const PipelineFrequencies& plan) {
  json stages = json::array();
  for (const auto& stage : plan) {
    json list = json::array();
    for (const auto& [name, mhz] : stage) list.push_back(json::array({name, mhz}));
    stages.push_back(std::move(list));
  }
  return stages;
}

PipelineFrequencies plan_from_json(const json& stages) {
  PipelineFrequencies plan;
  for (const auto& stage : stages) {
    auto& list = plan.emplace_back();
    for (const auto& entry : stage) list.emplace_back(entry.at(0).get<std::string>(), entry.at(1).get<int>());
  }
  return plan;
}

JobLifecycle::JobLifecycle(std::optional<PipelineLayout> layout) : layout_(std::move(layout)) {
  enter_highest_clock(JobPhase::kWaiting, std::string(kWaitingLabel));
}

void JobLifecycle::serve_point(PipelineFrequencies plan, PlanLists lists) {
  point_plan_ = plan;
  point_plan_lists_ = lists;
  enter(JobPhase::kPoint, std::make_unique<PointSolutionScheduler>(std::move(plan), lists));
}

void JobLifecycle::start_profiling(const ProfilingSettings& settings) {
  if (!layout_) throw InputError("in-vivo profiling needs the job's pipeline layout");
  enter(JobPhase::kProfiling, std::make_unique<InVivoProfilingScheduler>(*layout_, settings, json()));
}

void JobLifecycle::start_computing(PipelineLayout layout, std::vector<std::string> warnings) {
  ++profile_version_;
  layout_ = std::move(layout);
  compute_attempts_ = 0;
  error_.clear();
  warnings_ = std::move(warnings);
  enter_highest_clock(JobPhase::kComputing, std::string(kComputingLabel));
}

void JobLifecycle::frontier_ready(std::shared_ptr<const FrontierTable> table, double seconds) {
  compute_attempts_ = 0;
  error_.clear();
  frontier_seconds_ = seconds;
  enter(JobPhase::kFrontier, std::make_unique<FrontierScheduler>(std::move(table), std::vector<StragglerState>{}));
}

void JobLifecycle::frontier_failed(std::string_view why) {
  compute_attempts_ = 0;
  fail(fmt::format("frontier computation failed: {}", why), "frontier");
}

void JobLifecycle::fail(std::string error, std::string_view what_failed) {
  error_ = std::move(error);
  enter_highest_clock(JobPhase::kFailed, fmt::format("highest clock, {} failed", what_failed));
}

void JobLifecycle::restore(const json& state, const ProfilingSettings& settings, bool has_profile,
                           const std::function<std::shared_ptr<const FrontierTable>()>& stored_frontier) {
  if (state.contains("layout") && !state.at("layout").is_null()) {
    layout_ = parse_layout(state.at("layout"), "stored layout");
  }
  const std::string name = state.value("phase", "waiting");
  error_ = state.value("error", "");
  warnings_ = state.value("warnings", std::vector<std::string>{});
  profiling_stop_reason_ = state.value("profiling_stop_reason", "");
  frontier_seconds_ = state.value("frontier_seconds", 0.0);
  compute_attempts_ = state.value("compute_attempts", 0);
  const json saved = state.value("scheduler_state", json::object());
  const std::optional<JobPhase> phase = parse_job_phase(name);
  if (!phase) throw InputError(fmt::format("unknown phase '{}'", name));

  switch (*phase) {
    case JobPhase::kPoint:
      // Stored before plans per rank existed: per stage.
      serve_point(plan_from_json(state.at("point_plan")),
                  state.value("point_plan_lists", "stage") == "rank" ? PlanLists::kPerRank : PlanLists::kPerStage);
      return;
    case JobPhase::kProfiling:
      if (!layout_) throw InputError("a profiling job without a layout");
      enter(JobPhase::kProfiling, std::make_unique<InVivoProfilingScheduler>(*layout_, settings, saved));
      return;
    case JobPhase::kFrontier:
      if (auto table = stored_frontier()) {
        enter(JobPhase::kFrontier,
              std::make_unique<FrontierScheduler>(std::move(table), FrontierScheduler::stragglers_from_json(saved)));
        return;
      }
      [[fallthrough]];  // the frontier is gone: computed again from the stored profile
    case JobPhase::kComputing:
      if (has_profile) {
        ++profile_version_;  // the stored profile's computation is due again
        enter_highest_clock(JobPhase::kComputing, std::string(kComputingLabel));
      } else {
        enter_highest_clock(JobPhase::kWaiting, std::string(kWaitingLabel));
      }
      return;
    case JobPhase::kWaiting:
      enter_highest_clock(JobPhase::kWaiting, std::string(kWaitingLabel));
      return;
    case JobPhase::kFailed:
      // Which step failed is not stored; error() says what happened.
      enter_highest_clock(JobPhase::kFailed, "highest clock, frontier failed");
      return;
  }
}

InVivoProfilingScheduler* JobLifecycle::profiling() {
  return phase_ == JobPhase::kProfiling ? static_cast<InVivoProfilingScheduler*>(scheduler_.get()) : nullptr;
}

const InVivoProfilingScheduler* JobLifecycle::profiling() const {
  return phase_ == JobPhase::kProfiling ? static_cast<const InVivoProfilingScheduler*>(scheduler_.get()) : nullptr;
}

FrontierScheduler* JobLifecycle::frontier() {
  return phase_ == JobPhase::kFrontier ? static_cast<FrontierScheduler*>(scheduler_.get()) : nullptr;
}

const FrontierScheduler* JobLifecycle::frontier() const {
  return phase_ == JobPhase::kFrontier ? static_cast<const FrontierScheduler*>(scheduler_.get()) : nullptr;
}

json JobLifecycle::state_json() const {
  json state = {{"phase", std::string(to_string(phase_))},
                {"layout", layout_ ? to_json(*layout_) : json(nullptr)},
                {"error", error_},
                {"warnings", warnings_},
                {"profiling_stop_reason", profiling_stop_reason_},
                {"frontier_seconds", frontier_seconds_},
                {"scheduler_state", scheduler_->state()},
                {"compute_attempts", compute_attempts_}};
  if (phase_ == JobPhase::kPoint) {
    state["point_plan"] = plan_json(point_plan_);
    state["point_plan_lists"] = point_plan_lists_ == PlanLists::kPerRank ? "rank" : "stage";
  }
  return state;
}

// The only place a scheduler is replaced, so that the accessors' casts follow the phase.
void JobLifecycle::enter(JobPhase phase, std::unique_ptr<Scheduler> scheduler) {
  // The reason profiling stopped outlives its scheduler: the job's page shows it.
  if (const InVivoProfilingScheduler* finished = profiling(); finished && finished->done()) {
    profiling_stop_reason_ = finished->stop_reason();
  }
  phase_ = phase;
  scheduler_ = std::move(scheduler);
}

void JobLifecycle::enter_highest_clock(JobPhase phase, std::string label) {
  enter(phase, std::make_unique<MaxFrequencyScheduler>(layout_, std::move(label)));
}

}  // namespace perseus::server
