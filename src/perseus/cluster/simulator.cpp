#include "perseus/cluster/simulator.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "perseus/cluster/cluster_scheduler.hpp"
#include "perseus/cluster/emulated_backend.hpp"

namespace perseus::cluster {
namespace {

// What the backend (the GPU counts) and the scheduler (the round) do not check themselves.
void check(const SimulationSpec& spec) {
  if (!(spec.restart_overhead_s >= 0.0) || spec.restart_overhead_s >= spec.round_s)
    throw InputError(fmt::format("restart overhead {} s: must be >= 0 and shorter than a round ({} s)", spec.restart_overhead_s,
                                 spec.round_s));
  if (spec.window_begin < 0 || (spec.window_end >= 0 && spec.window_end <= spec.window_begin))
    throw InputError(fmt::format("measured jobs [{}, {}): must be a non-empty range of arrival indices", spec.window_begin,
                                 spec.window_end));
}

}  // namespace

SimulationResult simulate(JobSource source, const ThroughputMatrix& matrix, const SimulationSpec& spec) {
  const int J = matrix.num_gpu_types();
  EmulatedCluster cluster;
  cluster.truth = matrix;
  cluster.workers = spec.workers;
  cluster.gpus_per_server = spec.gpus_per_server;
  cluster.restart_s = spec.restart_overhead_s;
  EmulatedBackend backend(std::move(cluster));
  // The truth is the matrix: measuring confirms it (to rounding) and never reallocates.
  ClusterScheduler scheduler(matrix, backend, {spec.policy, spec.round_s});
  check(spec);
  // A job that fits no GPU type would wait for ever.
  std::vector<double> fastest(static_cast<std::size_t>(matrix.num_job_types()), 0.0);  // 0: fits no type
  for (int m = 0; m < matrix.num_job_types(); ++m) fastest[static_cast<std::size_t>(m)] = best_speed(matrix, m, spec.workers);

  SimulationResult out;
  std::optional<TraceJob> pending = source();
  int window_finished = 0;
  const auto in_window = [&](int id) { return id >= spec.window_begin && (spec.window_end < 0 || id < spec.window_end); };
  const auto report = [&] {
    if (!spec.progress) return;
    SimulationProgress p;
    p.time_s = scheduler.now_s();
    p.arrived = static_cast<int>(out.jobs.size());
    p.finished = p.arrived - scheduler.active_jobs();
    p.window_finished = window_finished;
    p.window_size = spec.window_end >= 0 ? spec.window_end - spec.window_begin : p.arrived - spec.window_begin;
    spec.progress(p);
  };
  const auto done = [&] {
    if (spec.window_end >= 0 && window_finished == spec.window_end - spec.window_begin) return true;
    return !pending && scheduler.idle();  // the trace ended (before the window did)
  };

  while (!done() && scheduler.now_s() < spec.max_time_s) {
    if (scheduler.idle() && pending && pending->arrival_s > scheduler.now_s()) scheduler.idle_until(pending->arrival_s);
    while (pending && pending->arrival_s <= scheduler.now_s()) {
      const int id = static_cast<int>(out.jobs.size());
      if (pending->type < 0 || pending->type >= matrix.num_job_types())
        throw InputError(fmt::format("job {}: no job type {}", id, pending->type));
      const JobType& type = matrix.job_types[static_cast<std::size_t>(pending->type)];
      if (fastest[static_cast<std::size_t>(pending->type)] <= 0.0)
        throw InputError(fmt::format("job {} ({}) can run on no GPU type of this cluster (it needs {} GPUs of a type it has a "
                                     "throughput on)",
                                     id, type.name(), type.scale_factor));
      JobOutcome j;
      j.id = id;
      j.type = pending->type, j.arrival_s = pending->arrival_s, j.steps = pending->steps, j.weight = pending->weight;
      j.slo_s = pending->slo_s;
      // Jobs the trace gives no entity are dealt to the entities round-robin.
      j.entity = pending->entity >= 0 ? pending->entity : dealt_entity(static_cast<std::size_t>(id), spec.policy);
      j.measured = in_window(id);
      try {
        scheduler.submit({j.type, j.steps, j.weight, j.slo_s, j.entity}, j.arrival_s);
      } catch (const InputError& e) {
        throw InputError(fmt::format("job {}: {}", id, e.what()));
      }
      out.jobs.push_back(std::move(j));
      pending = source();
    }
    if (scheduler.idle()) continue;

    const RoundLog& round = scheduler.run_round();
    out.rounds.push_back({round.start_s, round.active_jobs, round.busy_gpus, round.energy_j / spec.round_s});
    for (int id : round.finished) window_finished += in_window(id) ? 1 : 0;
    if (out.rounds.size() % 100 == 0) report();
  }
  out.end_s = scheduler.now_s();
  const ClusterUsage& usage = scheduler.usage();
  out.allocations = usage.allocations;
  out.policy_s = usage.policy_s;
  out.leases = usage.leases;
  out.renewals = usage.renewals;
  out.allocation_gap = scheduler.allocation_gap();
  out.utilisation.assign(static_cast<std::size_t>(J), 0.0);
  for (int j = 0; j < J; ++j)
    if (spec.workers[j] > 0 && out.end_s > 0.0) out.utilisation[j] = usage.busy_gpu_s[j] / (spec.workers[j] * out.end_s);
  double jct_sum = 0.0, rho_sum = 0.0;
  for (JobOutcome& o : out.jobs) {
    const ScheduledJob& s = scheduler.jobs()[static_cast<std::size_t>(o.id)];
    o.start_s = s.started_s;
    o.completion_s = s.finished_s;
    o.gpu_s = s.gpu_s;
    o.energy_j = s.energy_j;
    o.rounds = s.rounds, o.preemptions = s.preemptions, o.migrations = s.migrations;
    o.isolated_s = s.isolated_s;
    if (!o.measured) continue;
    ++out.window_jobs;
    out.energy_j += o.energy_j;
    if (!o.finished()) {
      ++out.window_unfinished;
      continue;
    }
    jct_sum += o.jct_s();
    rho_sum += o.finish_time_fairness();
    if (std::isfinite(o.slo_s)) ++out.slo_jobs, out.slo_violations += o.missed_slo() ? 1 : 0;
    if (!spec.policy.prices_per_hour.empty())
      for (int j = 0; j < J; ++j) out.cost += o.gpu_s[static_cast<std::size_t>(j)] / 3600.0 * spec.policy.prices_per_hour[j];
    out.makespan_s = std::max(out.makespan_s, o.completion_s);
  }
  const int finished_in_window = out.window_jobs - out.window_unfinished;
  out.average_jct_s = finished_in_window > 0 ? jct_sum / finished_in_window : 0.0;
  out.average_finish_time_fairness = finished_in_window > 0 ? rho_sum / finished_in_window : 0.0;
  report();
  return out;
}

}  // namespace perseus::cluster
