#include "perseus/cluster/cluster_scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

namespace perseus::cluster {

ClusterScheduler::ClusterScheduler(ThroughputMatrix matrix, ClusterBackend& backend, SchedulerOptions options)
    : matrix_(std::move(matrix)),
      backend_(backend),
      options_(std::move(options)),
      rounds_scheduler_(std::vector<int>(matrix_.gpu_types.size(), 0), 1) {
  check_round_length(options_.round_s);
  if (!(options_.measurement_weight > 0.0 && options_.measurement_weight <= 1.0))
    throw InputError(fmt::format("measurement weight {}: must be in (0, 1]", options_.measurement_weight));
  check_backend_supports(options_.policy, backend_.shares_gpus(), backend_.paces_jobs());
  measurements_.assign(matrix_.job_types.size(), std::vector<int>(matrix_.gpu_types.size(), 0));
  topology_.workers.assign(matrix_.gpu_types.size(), 0);
  usage_.busy_gpu_s.assign(matrix_.gpu_types.size(), 0.0);
}

void check_backend_supports(const PolicySpec& policy, bool shares_gpus, bool paces_jobs) {
  if (policy.space_sharing && !shares_gpus)
    throw InputError("space sharing: this cluster's backend runs one job per GPU (the emulated one shares GPUs)");
  if (policy.energy_slack && !paces_jobs)
    throw InputError("the energy stage: this cluster's backend runs every job at its fastest (the emulated one paces jobs)");
}

void check_job_request(const JobRequest& request, const ThroughputMatrix& matrix, const PolicySpec& policy) {
  if (request.type < 0 || request.type >= matrix.num_job_types())
    throw InputError(fmt::format("job type {}: the matrix has {} job types", request.type, matrix.num_job_types()));
  const std::vector<double>& row = matrix.steps_per_s[static_cast<std::size_t>(request.type)];
  if (std::none_of(row.begin(), row.end(), [](double t) { return t > 0.0; }))
    throw InputError(fmt::format("job type {} has no throughput on any GPU type", matrix.job_types[request.type].name()));
  if (!(request.steps > 0.0) || !std::isfinite(request.steps))
    throw InputError(fmt::format("{} steps: a job needs a number > 0", request.steps));
  if (!(request.weight >= 0.0) || !std::isfinite(request.weight))
    throw InputError(fmt::format("weight {}: must be a number >= 0", request.weight));
  const int entities = static_cast<int>(entities_of(policy).size());
  if (request.entity < 0 || request.entity >= entities)
    throw InputError(fmt::format("entity {}: the policy has {} entities", request.entity, entities));
}

int ClusterScheduler::submit(JobRequest request, double submitted_s) {
  check_job_request(request, matrix_, options_.policy);
  if (!(submitted_s >= 0.0 && submitted_s <= now_s_))
    throw InputError(fmt::format("submitted at {} s: not between 0 and the scheduler's clock ({} s)", submitted_s, now_s_));
  ScheduledJob job;
  job.id = static_cast<int>(jobs_.size());
  job.submitted_s = submitted_s;
  job.gpu_s.assign(matrix_.gpu_types.size(), 0.0);
  job.request = std::move(request);
  jobs_.push_back(std::move(job));
  hand_over(jobs_.back());
  return jobs_.back().id;
}

void ClusterScheduler::idle_until(double t_s) {
  if (!idle()) throw InputError(fmt::format("the clock moves on only while no job is active ({} are)", active_.size()));
  if (!(t_s >= now_s_) || !std::isfinite(t_s))
    throw InputError(fmt::format("idle until {} s: before the scheduler's clock ({} s)", t_s, now_s_));
  now_s_ = t_s;
}

void ClusterScheduler::hand_over(ScheduledJob& job) {
  try {
    backend_.submit({job.id, job.request.type, matrix_.job_types[job.request.type].scale_factor, job.request.steps,
                     job.request.command, job.steps_done});
  } catch (const SolveError& e) {
    // The cluster refused it (Slurm: a bad partition or account, say): this job fails, the others go on.
    job.status = JobStatus::kFailed;
    job.finished_s = now_s_;
    job.detail = fmt::format("the backend refused it: {}", e.what());
    return;
  }
  active_.push_back(job.id);
  changed_ = true;
}

void ClusterScheduler::restore(double now_s, std::vector<ScheduledJob> jobs, std::vector<std::vector<int>> measurements) {
  if (!jobs_.empty() || rounds_run_ > 0) throw InputError("a scheduler restores before its first job and round");
  if (!std::isfinite(now_s) || now_s < 0.0) throw InputError(fmt::format("restored clock {} s: must be >= 0", now_s));
  const bool shaped = measurements.size() == matrix_.job_types.size() &&
                      std::all_of(measurements.begin(), measurements.end(),
                                  [&](const std::vector<int>& row) { return row.size() == matrix_.gpu_types.size(); });
  if (!shaped) throw InputError("restored measurement counts: not one per job type and GPU type of the matrix");
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    ScheduledJob& job = jobs[k];
    if (job.id != static_cast<int>(k)) throw InputError(fmt::format("restored job {} at position {}: ids must be 0, 1, ...", job.id, k));
    try {
      check_job_request(job.request, matrix_, options_.policy);
    } catch (const InputError& e) {
      throw InputError(fmt::format("restored job {}: {}", job.id, e.what()));
    }
    job.gpu_type = job.partner = -1;
    job.gpu_s.resize(matrix_.gpu_types.size(), 0.0);
    if (is_over(job.status)) continue;
    job.status = JobStatus::kWaiting;
  }
  jobs_ = std::move(jobs);
  for (ScheduledJob& job : jobs_)
    if (job.status == JobStatus::kWaiting) hand_over(job);
  measurements_ = std::move(measurements);
  now_s_ = allocation_start_s_ = now_s;
  changed_ = true;
}

bool ClusterScheduler::cancel(int id) {
  if (id < 0 || id >= static_cast<int>(jobs_.size()))
    throw InputError(fmt::format("cancel job {}: the scheduler has jobs 0 to {}", id, static_cast<int>(jobs_.size()) - 1));
  ScheduledJob& job = jobs_[static_cast<std::size_t>(id)];
  if (is_over(job.status)) return false;
  backend_.cancel(id);
  job.status = JobStatus::kCancelled;
  job.finished_s = now_s_;
  job.gpu_type = job.partner = -1;
  job.cancel_requested = false;
  std::erase(active_, id);
  changed_ = true;
  return true;
}

double ClusterScheduler::allocation_gap() const {
  const double held = std::max(0.0, now_s_ - allocation_start_s_);
  const double time = gap_time_ + held;
  return time > 0.0 ? (gap_weighted_ + rounds_scheduler_.allocation_gap() * held) / time : 0.0;
}

void ClusterScheduler::reallocate() {
  // The allocation ending now is weighed by how long it was in force.
  if (const double held = now_s_ - allocation_start_s_; held > 0.0) {
    gap_weighted_ += rounds_scheduler_.allocation_gap() * held;
    gap_time_ += held;
  }
  allocation_start_s_ = now_s_;
  allocated_jobs_.clear();
  std::vector<Job> jobs;
  for (int id : active_) {
    const ScheduledJob& s = jobs_[id];
    // Jobs that fit no GPU type up now wait outside the allocation.
    const double fastest = best_speed(matrix_, s.request.type, topology_.workers);
    if (fastest <= 0.0) continue;
    const double steps = s.request.steps - s.steps_done;
    jobs.push_back({s.request.type, s.request.weight, steps, now_s_ - s.submitted_s,
                    slo_to_aim(s.submitted_s + s.request.slo_s - now_s_, steps, fastest, options_.round_s), s.request.entity});
    allocated_jobs_.push_back(id);
  }
  share_.clear();
  pairs_.clear();
  std::vector<Combination> combinations;
  if (!jobs.empty()) {
    const auto solve_start = std::chrono::steady_clock::now();
    Allocation a = allocate(jobs, matrix_, topology_.workers, options_.policy);
    usage_.policy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_start).count();
    ++usage_.allocations;
    const std::vector<std::vector<double>> isolated = isolated_share(jobs, matrix_, topology_.workers);
    pace_.resize(jobs_.size());
    isolated_speed_.resize(jobs_.size(), 0.0);
    combinations.reserve(jobs.size() + a.pairs.size());
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      const int id = allocated_jobs_[k];
      // The energy stage's speed, as a fraction of the figure the backend's job runs at.
      std::vector<double>& pace = pace_[static_cast<std::size_t>(id)];
      pace.assign(matrix_.gpu_types.size(), 1.0);
      for (std::size_t j = 0; j < pace.size(); ++j)
        if (const double figure = matrix_.steps_per_s[jobs[k].type][j]; figure > 0.0) pace[j] = std::min(1.0, a.speed[k][j] / figure);
      isolated_speed_[static_cast<std::size_t>(id)] = effective_throughput(matrix_, jobs[k].type, isolated[k]);
      combinations.push_back({id, -1, matrix_.job_types[jobs[k].type].scale_factor, a.share[k]});
    }
    for (SharedShare& p : a.pairs) {
      const int first = allocated_jobs_[static_cast<std::size_t>(p.first)], second = allocated_jobs_[static_cast<std::size_t>(p.second)];
      combinations.push_back({first, second, matrix_.job_types[jobs[static_cast<std::size_t>(p.first)].type].scale_factor, p.share});
      pairs_.push_back({first, second, std::move(p.share)});
    }
    if (!pairs_.empty())  // singles come in id order already
      std::sort(combinations.begin(), combinations.end(),
                [](const Combination& x, const Combination& y) { return std::tie(x.job, x.partner) < std::tie(y.job, y.partner); });
    share_ = std::move(a.share);
  }
  rounds_scheduler_.set_allocation(std::move(combinations));
}

void ClusterScheduler::measure(const ScheduledJob& job, int gpu_type, double steps, double ran_s, double pace) {
  // A job that fell back to its checkpoint, or barely ran, tells nothing about its speed.
  if (!(steps > 0.0) || !(ran_s > 0.0)) return;
  const std::size_t m = static_cast<std::size_t>(job.request.type), j = static_cast<std::size_t>(gpu_type);
  double& figure = matrix_.steps_per_s[m][j];
  const double measured = steps / ran_s / pace;  // at its fastest
  ++measurements_[m][j];
  // Rounding (steps over seconds) is not news; a figure that moved by it would only make a
  // degenerate LP pick another vertex.
  if (std::abs(measured - figure) <= 1e-9 * figure) return;
  const double updated = measurements_[m][j] == 0 && figure <= 0.0
                             ? measured
                             : (1.0 - options_.measurement_weight) * figure + options_.measurement_weight * measured;
  if (std::abs(updated - figure) > options_.reallocate_on_change * std::max(figure, 1e-12)) changed_ = true;
  figure = updated;
}

void ClusterScheduler::account(ScheduledJob& job, const JobProgress& p, const Lease* lease, RoundLog& log) {
  if (lease) {
    // Only a job that ran alone through the whole round, its start over (it had stepped in the
    // round before, on these GPUs): a start's time (loading the checkpoint, warming up) is not its
    // speed, nor is a shared GPU's, and a backend may know the end of a job only roughly.
    if (lease->renewed && job.stepping && lease->partner < 0 && job.status == JobStatus::kRunning &&
        p.status == JobStatus::kRunning)
      measure(job, lease->gpu_type, p.steps_done - job.steps_done, p.ran_s, lease->pace);
    job.stepping = p.status == JobStatus::kRunning && p.steps_done > job.steps_done;
    const double held_s = std::clamp(p.ran_s, 0.0, options_.round_s);
    const int scale = matrix_.job_types[job.request.type].scale_factor;
    job.gpu_s[static_cast<std::size_t>(lease->gpu_type)] += (held_s - std::clamp(p.shared_s, 0.0, held_s) / 2.0) * scale;
    job.energy_j += p.energy_j;
    log.energy_j += p.energy_j;
  } else {
    job.stepping = false;
  }
  if (static_cast<std::size_t>(job.id) < isolated_speed_.size() && isolated_speed_[job.id] > 0.0)
    job.isolated_s += (p.steps_done - job.steps_done) / isolated_speed_[job.id];
  job.steps_done = p.steps_done;
  job.status = p.status;
  job.detail = p.detail;
  if (p.status == JobStatus::kFinished) {
    job.finished_s = log.start_s + std::min(p.ran_s, options_.round_s);
    log.finished.push_back(job.id);
  }
  if (p.status == JobStatus::kFailed) log.failed.push_back(job.id);
}

const RoundLog& ClusterScheduler::run_round() {
  RoundLog log;
  log.index = static_cast<int>(rounds_run_);
  log.start_s = now_s_;
  log.active_jobs = static_cast<int>(active_.size());
  ClusterTopology topology = backend_.topology();
  if (topology.workers.size() != matrix_.gpu_types.size())
    throw InputError(fmt::format("the backend reports {} GPU types, the matrix has {}", topology.workers.size(),
                                 matrix_.gpu_types.size()));
  if (topology != topology_) {
    topology_ = std::move(topology);
    rounds_scheduler_.set_workers(topology_.workers, topology_.gpus_per_server);
    changed_ = true;
  }
  log.topology = topology_;
  if (changed_) {
    reallocate();
    changed_ = false;
    log.reallocated = true;
  }
  log.leases = rounds_scheduler_.next_round();
  std::vector<int> held_before;
  for (int id : active_)
    if (jobs_[id].gpu_type >= 0) held_before.push_back(id);
  for (int id : active_) jobs_[id].gpu_type = jobs_[id].partner = -1;
  lease_of_.resize(jobs_.size(), -1);
  for (std::size_t k = 0; k < log.leases.size(); ++k) {
    Lease& l = log.leases[k];
    if (l.partner < 0) l.pace = pace_[static_cast<std::size_t>(l.job)][static_cast<std::size_t>(l.gpu_type)];
    for (const auto& [id, other] : {std::pair{l.job, l.partner}, std::pair{l.partner, l.job}}) {
      if (id < 0) continue;
      ScheduledJob& job = jobs_[id];
      job.gpu_type = l.gpu_type;
      job.partner = other;
      if (!l.renewed && job.rounds > 0) ++job.migrations;
      if (job.started_s < 0.0) job.started_s = now_s_;
      ++job.rounds;
      lease_of_[id] = static_cast<int>(k);
    }
  }
  for (int id : held_before)
    if (jobs_[id].gpu_type < 0) ++jobs_[id].preemptions;
  backend_.begin_round(log.leases);
  const std::vector<JobProgress> progress = backend_.end_round(options_.round_s);

  std::vector<double> ran(log.leases.size(), 0.0);
  for (const JobProgress& p : progress) {
    if (p.id < 0 || p.id >= static_cast<int>(jobs_.size())) continue;
    ScheduledJob& job = jobs_[p.id];
    if (is_over(job.status)) continue;
    const int k = lease_of_[p.id];
    if (k >= 0) ran[k] = std::max(ran[k], std::min(p.ran_s, options_.round_s));
    account(job, p, k >= 0 ? &log.leases[k] : nullptr, log);
  }
  for (const Lease& l : log.leases) {
    lease_of_[l.job] = -1;
    if (l.partner >= 0) lease_of_[l.partner] = -1;
  }
  rounds_scheduler_.finish_round(log.leases, ran, options_.round_s);
  log.busy_gpus.assign(matrix_.gpu_types.size(), 0);
  for (std::size_t k = 0; k < log.leases.size(); ++k) {
    const Lease& l = log.leases[k];
    const int scale = matrix_.job_types[jobs_[l.job].request.type].scale_factor;
    usage_.busy_gpu_s[static_cast<std::size_t>(l.gpu_type)] += ran[k] * scale;
    log.busy_gpus[static_cast<std::size_t>(l.gpu_type)] += scale;
    usage_.renewals += l.renewed ? 1 : 0;
    ++usage_.leases;
  }
  now_s_ += options_.round_s;
  if (!log.finished.empty() || !log.failed.empty()) {
    std::erase_if(active_, [&](int id) { return is_over(jobs_[id].status); });
    for (int id : log.finished) jobs_[id].gpu_type = jobs_[id].partner = -1;
    for (int id : log.failed) jobs_[id].gpu_type = jobs_[id].partner = -1;
    changed_ = true;
  }
  ++rounds_run_;
  last_round_ = std::move(log);
  return last_round_;
}

}  // namespace perseus::cluster
