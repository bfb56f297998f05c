#include "perseus/cluster/experiment_output.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perseus::cluster {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string run_key(const ExperimentRun& r) {
  return fmt::format("{},{},{},{},{:g},{}", to_string(r.variant.policy), r.variant.heterogeneity_aware ? "true" : "false",
                     r.variant.space_sharing ? "true" : "false", r.variant.energy_slack ? fmt::format("{:g}", *r.variant.energy_slack) : std::string(), r.jobs_per_hour,
                     r.seed);
}

// kWh, or empty without energy figures.
std::string kwh_field(const ThroughputMatrix& matrix, double joules) {
  return matrix.has_energy() ? fmt::format("{:.6g}", joules / 3.6e6) : std::string();
}

// The hierarchical policy's entities; null for other policies.
nlohmann::json entities_json(const PolicySpec& variant) {
  if (variant.policy != PolicyKind::kHierarchical) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const Entity& e : entities_of(variant))
    out.push_back({{"name", e.name}, {"weight", e.weight}, {"policy", std::string(to_string(e.policy))}});
  return out;
}

}  // namespace

std::string experiment_json(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix, const ExperimentSpec& spec) {
  nlohmann::json out;
  out["trace"] = std::string(to_string(spec.trace));
  if (spec.trace == TraceKind::kFile) out["trace_file"] = spec.trace_file;
  out["gpu_types"] = matrix.gpu_types;
  out["workers"] = spec.simulation.workers;
  out["gpus_per_server"] = spec.simulation.gpus_per_server;
  out["round_s"] = spec.simulation.round_s;
  out["restart_overhead_s"] = spec.simulation.restart_overhead_s;
  out["window"] = {spec.window_begin, spec.window_end};
  nlohmann::json rows = nlohmann::json::array();
  for (const ExperimentRun& r : runs) {
    const SimulationResult& s = r.result;
    rows.push_back({{"policy", std::string(to_string(r.variant.policy))},
                    {"heterogeneity_aware", r.variant.heterogeneity_aware},
                    {"space_sharing", r.variant.space_sharing},
                    {"energy_slack", r.variant.energy_slack ? nlohmann::json(*r.variant.energy_slack) : nlohmann::json(nullptr)},
                    {"entities", entities_json(r.variant)},
                    {"jobs_per_hour", r.jobs_per_hour},
                    {"seed", r.seed},
                    {"jobs_arrived", s.jobs.size()},
                    {"window_jobs", s.window_jobs},
                    {"window_unfinished", s.window_unfinished},
                    {"average_jct_h", s.average_jct_s / 3600.0},
                    {"average_ftf_rho", s.average_finish_time_fairness},
                    {"makespan_h", s.makespan_s / 3600.0},
                    {"end_h", s.end_s / 3600.0},
                    {"utilisation", s.utilisation},
                    {"allocation_gap", s.allocation_gap},
                    {"cost_dollars", r.variant.prices_per_hour.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.cost)},
                    {"energy_kwh", matrix.has_energy() ? nlohmann::json(s.energy_j / 3.6e6) : nlohmann::json(nullptr)},
                    {"slo_jobs", s.slo_jobs},
                    {"slo_violations", s.slo_violations},
                    {"rounds", s.rounds.size()},
                    {"leases", s.leases},
                    {"renewals", s.renewals},
                    {"allocations", s.allocations},
                    {"policy_s", s.policy_s},
                    {"wall_s", r.wall_s}});
  }
  out["runs"] = rows;
  return out.dump(1) + "\n";
}

std::string runs_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix) {
  std::string out =
      "policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,jobs_arrived,window_jobs,unfinished,average_jct_h,average_ftf_rho,"
      "makespan_h";
  for (const std::string& g : matrix.gpu_types) out += ",util_" + g;
  out += ",allocation_gap,cost_dollars,energy_kwh,slo_jobs,slo_violations,rounds,leases,renewals,allocations,policy_s,wall_s\n";
  for (const ExperimentRun& r : runs) {
    const SimulationResult& s = r.result;
    out += fmt::format("{},{},{},{},{:.6g},{:.6g},{:.6g}", run_key(r), s.jobs.size(), s.window_jobs, s.window_unfinished,
                       s.average_jct_s / 3600.0, s.average_finish_time_fairness, s.makespan_s / 3600.0);
    for (double u : s.utilisation) out += fmt::format(",{:.4f}", u);
    out += fmt::format(",{:.4f},{},{},{},{},{},{},{},{},{:.4f},{:.4f}\n", s.allocation_gap,
                       r.variant.prices_per_hour.empty() ? std::string() : fmt::format("{:.2f}", s.cost),
                       kwh_field(matrix, s.energy_j), s.slo_jobs,
                       s.slo_violations, s.rounds.size(), s.leases, s.renewals, s.allocations, s.policy_s, r.wall_s);
  }
  return out;
}

std::string jobs_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix) {
  std::string out =
      "policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,id,job,scale_factor,arrival_s,steps,weight,slo_s,entity,start_s,completion_s,jct_s";
  for (const std::string& g : matrix.gpu_types) out += ",gpu_s_" + g;
  out += ",energy_j,rounds,preemptions,migrations,measured,isolated_s,ftf_rho\n";
  for (const ExperimentRun& r : runs)
    for (const JobOutcome& o : r.result.jobs) {
      const JobType& type = matrix.job_types[static_cast<std::size_t>(o.type)];
      out += fmt::format("{},{},{},{},{:.3f},{:.6g},{:g},{}", run_key(r), o.id, quoted(type.name()), type.scale_factor,
                         o.arrival_s, o.steps, o.weight, std::isfinite(o.slo_s) ? fmt::format("{:.3f}", o.slo_s) : std::string());
      const auto& entities = r.variant.entities;
      out += ',';
      if (static_cast<std::size_t>(o.entity) < entities.size()) out += quoted(entities[static_cast<std::size_t>(o.entity)].name);
      out += o.start_s >= 0.0 ? fmt::format(",{:.3f}", o.start_s) : std::string(",");
      out += o.finished() ? fmt::format(",{:.3f},{:.3f}", o.completion_s, o.jct_s()) : std::string(",,");
      for (double g : o.gpu_s) out += fmt::format(",{:.1f}", g);
      out += matrix.has_energy() ? fmt::format(",{:.1f}", o.energy_j) : std::string(",");
      out += fmt::format(",{},{},{},{},{:.3f}", o.rounds, o.preemptions, o.migrations, o.measured ? "true" : "false", o.isolated_s);
      out += o.finished() ? fmt::format(",{:.6g}\n", o.finish_time_fairness()) : std::string(",\n");
    }
  return out;
}

std::string rounds_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix) {
  std::string out = "policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,round,start_s,active_jobs";
  for (const std::string& g : matrix.gpu_types) out += ",busy_" + g;
  out += ",power_w\n";
  for (const ExperimentRun& r : runs)
    for (std::size_t k = 0; k < r.result.rounds.size(); ++k) {
      const RoundRecord& rr = r.result.rounds[k];
      out += fmt::format("{},{},{:.1f},{}", run_key(r), k, rr.start_s, rr.active_jobs);
      for (int b : rr.busy_gpus) out += fmt::format(",{}", b);
      out += matrix.has_energy() ? fmt::format(",{:.1f}\n", rr.power_w) : std::string(",\n");
    }
  return out;
}

}  // namespace perseus::cluster
