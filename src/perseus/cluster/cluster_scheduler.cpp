#include "perseus/cluster/cluster_scheduler.hpp"

#include <algorithm>
#include <cmath>

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
  if (options_.policy.space_sharing)
    throw InputError("space sharing: a live cluster runs one job per GPU (the simulator shares GPUs)");
  measurements_.assign(matrix_.job_types.size(), std::vector<int>(matrix_.gpu_types.size(), 0));
  topology_.workers.assign(matrix_.gpu_types.size(), 0);
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

int ClusterScheduler::submit(JobRequest request) {
  check_job_request(request, matrix_, options_.policy);
  ScheduledJob job;
  job.id = static_cast<int>(jobs_.size());
  job.submitted_s = now_s_;
  job.request = std::move(request);
  jobs_.push_back(std::move(job));
  hand_over(jobs_.back());
  return jobs_.back().id;
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
  if (!jobs_.empty() || !rounds_.empty()) throw InputError("a scheduler restores before its first job and round");
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
    job.gpu_type = -1;
    if (job.status == JobStatus::kFinished || job.status == JobStatus::kFailed) continue;
    job.status = JobStatus::kWaiting;
  }
  jobs_ = std::move(jobs);
  for (ScheduledJob& job : jobs_)
    if (job.status == JobStatus::kWaiting) hand_over(job);
  measurements_ = std::move(measurements);
  now_s_ = now_s;
  changed_ = true;
}

void ClusterScheduler::reallocate() {
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
  std::vector<Combination> combinations;
  if (!jobs.empty()) {
    Allocation a = allocate(jobs, matrix_, topology_.workers, options_.policy);
    share_ = std::move(a.share);
    for (std::size_t k = 0; k < jobs.size(); ++k)
      combinations.push_back({allocated_jobs_[k], -1, matrix_.job_types[jobs[k].type].scale_factor, share_[k]});
  }
  rounds_scheduler_.set_allocation(std::move(combinations));
}

void ClusterScheduler::measure(const ScheduledJob& job, int gpu_type, double steps, double ran_s) {
  // A job that fell back to its checkpoint, or barely ran, tells nothing about its speed.
  if (!(steps > 0.0) || !(ran_s > 0.0)) return;
  const std::size_t m = static_cast<std::size_t>(job.request.type), j = static_cast<std::size_t>(gpu_type);
  double& figure = matrix_.steps_per_s[m][j];
  const double measured = steps / ran_s;
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

const RoundLog& ClusterScheduler::run_round() {
  RoundLog log;
  log.index = static_cast<int>(rounds_.size());
  log.start_s = now_s_;
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
  for (int id : active_) jobs_[id].gpu_type = -1;
  for (const Lease& l : log.leases) {
    jobs_[l.job].gpu_type = l.gpu_type;
    ++jobs_[l.job].rounds;
  }
  for (int id : held_before)
    if (jobs_[id].gpu_type < 0) ++jobs_[id].preemptions;
  backend_.begin_round(log.leases);
  const std::vector<JobProgress> progress = backend_.end_round(options_.round_s);

  std::vector<double> ran(log.leases.size(), 0.0);
  std::vector<int> lease_of(jobs_.size(), -1);
  for (std::size_t k = 0; k < log.leases.size(); ++k) lease_of[log.leases[k].job] = static_cast<int>(k);
  for (const JobProgress& p : progress) {
    if (p.id < 0 || p.id >= static_cast<int>(jobs_.size())) continue;
    ScheduledJob& job = jobs_[p.id];
    if (job.status == JobStatus::kFinished || job.status == JobStatus::kFailed) continue;
    if (const int k = lease_of[p.id]; k >= 0) {
      const Lease& l = log.leases[k];
      ran[k] = std::min(p.ran_s, options_.round_s);
      // Only a job that ran through the whole round: a start's time (loading the checkpoint,
      // warming up) is not its speed, and a backend may know the end of a job only roughly.
      if (l.renewed && job.status == JobStatus::kRunning && p.status == JobStatus::kRunning)
        measure(job, l.gpu_type, p.steps_done - job.steps_done, p.ran_s);
    }
    job.steps_done = p.steps_done;
    job.status = p.status;
    job.detail = p.detail;
    if (p.status == JobStatus::kFinished) {
      job.finished_s = log.start_s + std::min(p.ran_s, options_.round_s);
      log.finished.push_back(p.id);
    }
    if (p.status == JobStatus::kFailed) log.failed.push_back(p.id);
  }
  rounds_scheduler_.finish_round(log.leases, ran, options_.round_s);
  now_s_ += options_.round_s;
  if (!log.finished.empty() || !log.failed.empty()) {
    std::erase_if(active_, [&](int id) {
      return jobs_[id].status == JobStatus::kFinished || jobs_[id].status == JobStatus::kFailed;
    });
    for (int id : log.finished) jobs_[id].gpu_type = -1;
    for (int id : log.failed) jobs_[id].gpu_type = -1;
    changed_ = true;
  }
  rounds_.push_back(std::move(log));
  return rounds_.back();
}

}  // namespace perseus::cluster
