#include "perseus/server/schedulers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/server/api.hpp"

namespace perseus::server {
namespace {

std::shared_ptr<const PipelineFrequencies> uniform_plan(const PipelineLayout& layout, int stages, int frequency) {
  auto plan = std::make_shared<PipelineFrequencies>();
  for (const auto& names : stage_instruction_names(layout, stages)) {
    auto& stage = plan->emplace_back();
    for (const std::string& name : names) stage.emplace_back(name, frequency);
  }
  return plan;
}

}  // namespace

bool Deployment::straggles(const RankInfo& rank) const {
  return straggling && std::binary_search(straggler_pipelines.begin(), straggler_pipelines.end(), rank.dp_rank);
}

std::size_t Deployment::list_index(const RankInfo& rank) const {
  return static_cast<std::size_t>(lists == PlanLists::kPerRank ? rank.rank : rank.pp_rank);
}

const StageFrequencies& Deployment::for_rank(const RankInfo& rank) const {
  const PipelineFrequencies& plan = straggles(rank) ? *straggling : *normal;
  if (list_index(rank) >= plan.size()) {
    if (lists == PlanLists::kPerRank) {
      throw ApiError(409, fmt::format("the plan has {} lists, one per rank; rank {} has none", plan.size(), rank.rank));
    }
    throw ApiError(409, fmt::format("the plan has {} stages; rank {} is on pp_rank {}", plan.size(), rank.rank,
                                    rank.pp_rank));
  }
  return plan[list_index(rank)];
}

void Deployment::prepare() {
  const auto serialize = [](const PipelineFrequencies& plan) {
    std::vector<std::string> out;
    out.reserve(plan.size());
    for (const StageFrequencies& stage : plan) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& [name, mhz] : stage) list.push_back(nlohmann::json::array({name, mhz}));
      out.push_back(list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    return out;
  };
  normal_json = normal ? serialize(*normal) : std::vector<std::string>{};
  straggling_json = straggling ? serialize(*straggling) : std::vector<std::string>{};
}

std::string Deployment::schedule_body(const RankInfo& rank) const {
  const std::vector<std::string>& prepared = straggles(rank) ? straggling_json : normal_json;
  if (prepared.empty()) {  // not prepared: the slow path
    return frequency_schedule_json(rank.rank, for_rank(rank)).dump(-1, ' ', false,
                                                                    nlohmann::json::error_handler_t::replace);
  }
  if (list_index(rank) >= prepared.size()) for_rank(rank);  // throws 409
  const std::string& list = prepared[list_index(rank)];
  std::string body;
  body.reserve(list.size() + 40);
  body += R"({"frequencies":)";
  body += list;
  body += R"(,"rank":)";
  body += std::to_string(rank.rank);
  body += '}';
  return body;
}

std::vector<int> common_frequencies(const JobView& job) {
  std::optional<std::set<int>> common;
  for (const auto& [rank, info] : job.ranks) {
    std::set<int> mine(info.available_frequencies.begin(), info.available_frequencies.end());
    if (!common) {
      common = std::move(mine);
      continue;
    }
    std::set<int> both;
    std::set_intersection(common->begin(), common->end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
    common = std::move(both);
  }
  if (!common || common->empty()) {
    throw ApiError(409, fmt::format("job {}: its ranks share no available frequency", job.info.job_id));
  }
  return {common->rbegin(), common->rend()};
}

// ---- PointSolution ----

PointSolutionScheduler::PointSolutionScheduler(PipelineFrequencies plan, PlanLists lists)
    : plan_(std::make_shared<const PipelineFrequencies>(std::move(plan))), lists_(lists) {}

Deployment PointSolutionScheduler::next_round(const JobView&, double) {
  Deployment deployment{plan_, nullptr, {}, std::nullopt, "point solution", {}, {}};
  deployment.lists = lists_;
  return deployment;
}

// ---- MaxFrequency ----

MaxFrequencyScheduler::MaxFrequencyScheduler(std::optional<PipelineLayout> layout, std::string label)
    : layout_(layout), label_(std::move(label)) {}

Deployment MaxFrequencyScheduler::next_round(const JobView& job, double) {
  if (!layout_) {
    throw ApiError(409, fmt::format("job {}: the server does not know its pipeline schedule yet; upload a profile "
                                    "(POST /profile/{{job_id}}?microbatches=...&schedule=...), register the job "
                                    "with \"microbatches\" and \"schedule\", or start the server with "
                                    "ZEUS_PFO_SCHEDULER_ARGS giving them",
                                    job.info.job_id));
  }
  const int frequency = common_frequencies(job).front();
  return Deployment{uniform_plan(*layout_, job.info.pp_degree, frequency), nullptr, {}, std::nullopt,
                    fmt::format("{} ({} MHz)", label_, frequency), {}, {}};
}

// ---- InVivoProfiling ----

InVivoProfilingScheduler::InVivoProfilingScheduler(PipelineLayout layout, ProfilingSettings settings,
                                                   const nlohmann::json& saved)
    : layout_(layout), settings_(settings) {
  if (saved.is_null() || saved.empty()) return;
  frequencies_ = saved.at("frequencies").get<std::vector<int>>();
  index_ = saved.at("index").get<std::size_t>();
  round_energy_ = saved.at("round_energy").get<std::vector<double>>();
  rises_ = saved.at("rises").get<int>();
  done_ = saved.at("done").get<bool>();
  stop_reason_ = saved.at("stop_reason").get<std::string>();
  for (const auto& row : saved.at("measured")) {
    const auto kind = parse_instruction_kind(row.at("instruction").get<std::string>());
    if (!kind) throw InputError("stored profiling state: unknown instruction " + row.at("instruction").dump());
    const int frequency = row.at("frequency").get<int>();
    measured_[{row.at("stage").get<int>(), *kind}].push_back(
        Measurement{std::to_string(frequency), frequency, row.at("time").get<double>(), row.at("energy").get<double>(), 0});
  }
  if (index_ > frequencies_.size()) throw InputError("stored profiling state: frequency index out of range");
}

nlohmann::json InVivoProfilingScheduler::state() const {
  nlohmann::json measured = nlohmann::json::array();
  for (const auto& [key, list] : measured_) {
    for (const Measurement& m : list) {
      measured.push_back({{"stage", key.first},
                          {"instruction", std::string(to_string(key.second))},
                          {"frequency", m.frequency_mhz},
                          {"time", m.time_s},
                          {"energy", m.energy_j}});
    }
  }
  return {{"frequencies", frequencies_}, {"index", index_},  {"round_energy", round_energy_},
          {"rises", rises_},             {"done", done_},    {"stop_reason", stop_reason_},
          {"measured", std::move(measured)}};
}

std::optional<int> InVivoProfilingScheduler::current_frequency() const {
  if (index_ < frequencies_.size()) return frequencies_[index_];
  return std::nullopt;
}

Deployment InVivoProfilingScheduler::next_round(const JobView& job, double) {
  if (frequencies_.empty()) frequencies_ = common_frequencies(job);
  // After the last frequency (or a stop) the service swaps schedulers; until then keep
  // the job at its highest clock.
  const int frequency = done_ ? frequencies_.front() : frequencies_[index_];
  return Deployment{uniform_plan(layout_, job.info.pp_degree, frequency), nullptr, {}, std::nullopt,
                    fmt::format("profiling {} MHz ({}/{})", frequency, std::min(index_ + 1, frequencies_.size()),
                                frequencies_.size()),
                    {}, {}};
}

bool InVivoProfilingScheduler::on_result(const JobView& job, const ProfilingResult& result) {
  if (done_ || frequencies_.empty()) return false;  // nothing is being measured
  RankSummary& summary = reports_[result.rank];
  std::size_t iterations = result.iter_time.size();
  for (const auto& [name, lists] : result.time_breakdown) iterations = std::max(iterations, lists.size());
  for (const auto& [name, iterations_of_name] : result.time_breakdown) {
    const auto kind = parse_instruction_kind(name);
    if (!kind) continue;  // names the profile has no place for
    auto& sums = summary.per_instruction[*kind];
    for (const auto& values : iterations_of_name) {
      for (double v : values) sums.time += v;
      sums.times += values.size();
    }
  }
  for (const auto& [name, iterations_of_name] : result.energy_breakdown) {
    const auto kind = parse_instruction_kind(name);
    if (!kind) continue;
    auto& sums = summary.per_instruction[*kind];
    for (const auto& values : iterations_of_name) {
      for (double v : values) sums.energy += v;
      sums.energies += values.size();
    }
  }
  if (!result.iter_energy.empty()) {
    summary.iteration_energy += std::accumulate(result.iter_energy.begin(), result.iter_energy.end(), 0.0);
  } else {
    for (const auto& [name, lists] : result.energy_breakdown) {
      for (const auto& values : lists) summary.iteration_energy += std::accumulate(values.begin(), values.end(), 0.0);
    }
  }
  summary.iterations += std::max<std::size_t>(iterations, 1);
  const auto needed = static_cast<std::size_t>(std::max(1, settings_.iterations_per_frequency));
  if (reports_.size() < static_cast<std::size_t>(job.info.world_size)) return false;
  for (const auto& [rank, s] : reports_) {
    if (s.iterations < needed) return false;
  }
  finish_frequency(job);
  return true;
}

void InVivoProfilingScheduler::finish_frequency(const JobView& job) {
  const int frequency = frequencies_[index_];
  // Per (stage, replica): the slowest tensor-parallel rank's time and the sum of their energy.
  struct StageFigures {
    double time = -1.0, energy = 0.0;
    bool has_energy = false;
  };
  std::map<std::tuple<int, InstructionKind, int>, StageFigures> per_replica;  // (stage, kind, dp_rank)
  double energy = 0.0;
  for (const auto& [rank, summary] : reports_) {
    const auto info = job.ranks.find(rank);
    if (info == job.ranks.end()) continue;
    for (const auto& [kind, sums] : summary.per_instruction) {
      if (sums.times == 0) continue;
      auto& figures = per_replica[{info->second.pp_rank, kind, info->second.dp_rank}];
      figures.time = std::max(figures.time, sums.time / static_cast<double>(sums.times));
      if (sums.energies > 0) {
        figures.energy += sums.energy / static_cast<double>(sums.energies);
        figures.has_energy = true;
      }
    }
    energy += summary.iteration_energy / static_cast<double>(std::max<std::size_t>(summary.iterations, 1));
  }
  reports_.clear();
  // Per stage: the slowest replica's time, the replicas' mean energy.
  std::map<std::pair<int, InstructionKind>, std::tuple<double, double, int>> per_stage;  // time, energy sum, count
  for (const auto& [key, figures] : per_replica) {
    if (!figures.has_energy) continue;  // a stage without energy figures cannot be planned
    auto& [time, joules, count] = per_stage[{std::get<0>(key), std::get<1>(key)}];
    time = std::max(time, figures.time);
    joules += figures.energy;
    ++count;
  }
  for (const auto& [key, value] : per_stage) {
    const auto& [time, joules, count] = value;
    // Results are bounded at the door, so these stay finite; a stage that read no time (or
    // anything else a profile refuses) is left out rather than failing the whole profile.
    if (!(std::isfinite(time) && time > 0 && std::isfinite(joules / count) && joules >= 0)) continue;
    measured_[key].push_back(Measurement{std::to_string(frequency), frequency, time, joules / count, 0});
  }
  // The state is persisted as JSON, where infinity would come back as null.
  if (!std::isfinite(energy)) energy = std::numeric_limits<double>::max();
  if (!round_energy_.empty() && energy > round_energy_.back()) {
    ++rises_;
  } else {
    rises_ = 0;
  }
  round_energy_.push_back(energy);
  ++index_;
  if (rises_ > settings_.max_energy_rises) {
    done_ = true;
    stop_reason_ = fmt::format("energy rose {} times in a row down to {} MHz", rises_, frequency);
  } else if (index_ >= frequencies_.size()) {
    done_ = true;
    stop_reason_ = fmt::format("measured all {} frequencies", frequencies_.size());
  }
}

Profile InVivoProfilingScheduler::profile(const std::string& source) const {
  std::vector<OperationProfile> operations;
  for (const auto& [key, list] : measured_) operations.push_back(OperationProfile{key.first, key.second, list});
  return Profile::from_operations(source, std::move(operations));
}

// ---- Frontier ----

FrontierScheduler::FrontierScheduler(std::shared_ptr<const FrontierTable> table, std::vector<StragglerState> stragglers)
    : table_(std::move(table)), stragglers_(std::move(stragglers)) {}

std::vector<StragglerState> FrontierScheduler::stragglers_from_json(const nlohmann::json& saved) {
  std::vector<StragglerState> out;
  if (!saved.is_object() || !saved.contains("stragglers")) return out;
  for (const auto& s : saved.at("stragglers")) {
    out.push_back(StragglerState{s.at("id").get<int>(), s.at("pipeline").get<int>(), s.at("degree").get<double>(),
                                 s.at("effective_at").get<double>(), s.at("announced_at").get<double>()});
  }
  return out;
}

nlohmann::json FrontierScheduler::state() const {
  nlohmann::json list = nlohmann::json::array();
  for (const StragglerState& s : stragglers_) {
    list.push_back({{"id", s.id},
                    {"pipeline", s.pipeline},
                    {"degree", s.degree},
                    {"effective_at", s.effective_at},
                    {"announced_at", s.announced_at}});
  }
  return {{"stragglers", std::move(list)}};
}

std::map<int, const StragglerState*> FrontierScheduler::active_at(double now) const {
  // The latest notice in force for each rank; a notice in force with degree 1 means recovered.
  std::map<int, const StragglerState*> latest;
  for (const StragglerState& s : stragglers_) {
    if (s.effective_at > now) continue;
    auto& slot = latest[s.id];
    if (!slot || s.effective_at >= slot->effective_at) slot = &s;
  }
  std::erase_if(latest, [](const auto& entry) { return entry.second->degree <= 1.0; });
  return latest;
}

StragglerDecision FrontierScheduler::decision_for(double t_prime) const {
  StragglerDecision decision;
  decision.t_min_s = table_->time(0);
  decision.t_prime_s = t_prime;
  decision.t_opt_s = std::min(table_->time(table_->t_star_index()), t_prime);
  // T' >= T_min, so a point always exists; fall back to T_min against float noise.
  decision.frontier_index = table_->select(t_prime).value_or(0);
  decision.plan_time_s = table_->time(decision.frontier_index);
  decision.plan_energy_j = table_->energy(decision.frontier_index);
  return decision;
}

StragglerDecision FrontierScheduler::decide(double now) const {
  double t_prime = table_->time(0);
  for (const auto& [id, s] : active_at(now)) t_prime = std::max(t_prime, s->degree * table_->time(0));
  return decision_for(t_prime);
}

StragglerDecision FrontierScheduler::announce(const StragglerState& notice) {
  stragglers_.push_back(notice);
  // Forget notices that this one (or an earlier one in force) has superseded.
  const double now = notice.announced_at;
  std::map<int, double> in_force;  // rank -> effective_at of its latest notice in force
  for (const StragglerState& s : stragglers_) {
    if (s.effective_at <= now) in_force[s.id] = std::max(in_force[s.id], s.effective_at);
  }
  std::erase_if(stragglers_, [&](const StragglerState& s) {
    const auto it = in_force.find(s.id);
    return it != in_force.end() && s.effective_at < it->second;
  });
  const StragglerDecision decision = decide(std::max(notice.effective_at, now));
  table_->plan(decision.frontier_index);  // build it now so the round that deploys it only looks it up
  return decision;
}

Deployment FrontierScheduler::next_round(const JobView&, double now) {
  const auto active = active_at(now);
  const StragglerDecision decision = decide(now);
  const auto t_min_plan = table_->plan(0);
  const auto plan = table_->plan(decision.frontier_index);
  Deployment deployment;
  deployment.normal = std::shared_ptr<const PipelineFrequencies>(plan, &plan->frequencies);
  deployment.frontier_index = decision.frontier_index;
  if (active.empty()) {
    deployment.label = "T_min";
    return deployment;
  }
  deployment.straggling = std::shared_ptr<const PipelineFrequencies>(t_min_plan, &t_min_plan->frequencies);
  std::set<int> pipelines;
  for (const auto& [id, s] : active) pipelines.insert(s->pipeline);
  deployment.straggler_pipelines.assign(pipelines.begin(), pipelines.end());
  deployment.label = fmt::format("T_opt = min(T*, T' = {:.4f} s) = {:.4f} s", decision.t_prime_s, decision.t_opt_s);
  return deployment;
}

}  // namespace perseus::server
