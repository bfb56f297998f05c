#include "perseus/cluster/emulated_backend.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace perseus::cluster {

EmulatedBackend::EmulatedBackend(EmulatedCluster cluster) : cluster_(std::move(cluster)) {
  if (static_cast<int>(cluster_.workers.size()) != cluster_.truth.num_gpu_types())
    throw InputError(fmt::format("the emulated cluster has {} GPU counts, the throughputs {} GPU types", cluster_.workers.size(),
                                 cluster_.truth.num_gpu_types()));
  check_workers(cluster_.workers, cluster_.gpus_per_server);
  if (!(cluster_.restart_s >= 0.0)) throw InputError(fmt::format("restart time {} s: must be >= 0", cluster_.restart_s));
  if (!(cluster_.checkpoint_s > 0.0)) throw InputError(fmt::format("checkpoint period {} s: must be > 0", cluster_.checkpoint_s));
  for (int w : cluster_.workers)
    up_.emplace_back(static_cast<std::size_t>((w + cluster_.gpus_per_server - 1) / cluster_.gpus_per_server), 1);
}

ClusterTopology EmulatedBackend::topology() {
  // Servers are whole (the last of a type may be smaller); a type's GPUs up are its servers up.
  ClusterTopology t{std::vector<int>(cluster_.workers.size(), 0), cluster_.gpus_per_server};
  for (std::size_t j = 0; j < up_.size(); ++j)
    for (std::size_t s = 0; s < up_[j].size(); ++s)
      if (up_[j][s])
        t.workers[j] += std::min(cluster_.gpus_per_server, cluster_.workers[j] - static_cast<int>(s) * cluster_.gpus_per_server);
  return t;
}

void EmulatedBackend::set_server_up(int gpu_type, int server, bool up) {
  if (gpu_type < 0 || gpu_type >= static_cast<int>(up_.size()) || server < 0 || server >= static_cast<int>(up_[gpu_type].size()))
    throw InputError(fmt::format("no server {} of GPU type {}", server, gpu_type));
  up_[gpu_type][server] = up ? 1 : 0;
  if (up) return;
  for (RunningJob& r : jobs_)
    if (r.gpu_type == gpu_type && std::find(r.servers.begin(), r.servers.end(), server) != r.servers.end()) {
      r.steps_done = r.checkpoint;
      r.since_checkpoint_s = 0.0;
      r.gpu_type = -1;
      r.servers.clear();
    }
}

int EmulatedBackend::server_up(int gpu_type, int k) const {
  for (std::size_t s = 0; s < up_[gpu_type].size(); ++s)
    if (up_[gpu_type][s] && k-- == 0) return static_cast<int>(s);
  return -1;
}

void EmulatedBackend::submit(const BackendJob& job) {
  if (job.id < static_cast<int>(jobs_.size()))
    throw InputError(fmt::format("job {}: the emulated cluster expects ids in increasing order ({} or more next)", job.id,
                                 jobs_.size()));
  if (job.type < 0 || job.type >= cluster_.truth.num_job_types())
    throw InputError(fmt::format("job {}: no job type {} in the emulated cluster's throughputs", job.id, job.type));
  if (!(job.steps_done >= 0.0 && job.steps_done < job.steps))
    throw InputError(fmt::format("job {}: resumes from {} of {} steps", job.id, job.steps_done, job.steps));
  // Ids a restored scheduler skipped (jobs over before it stopped) are never leased nor reported.
  while (static_cast<int>(jobs_.size()) < job.id) {
    RunningJob gap;
    gap.job.id = static_cast<int>(jobs_.size());
    gap.done = gap.reported_done = true;
    jobs_.push_back(std::move(gap));
  }
  RunningJob r;
  r.job = job;
  r.steps_done = r.checkpoint = job.steps_done;
  jobs_.push_back(std::move(r));
}

void EmulatedBackend::begin_round(const std::vector<Lease>& leases) {
  std::vector<char> leased(jobs_.size(), 0);
  for (const Lease& l : leases) {
    if (l.job < 0 || l.job >= static_cast<int>(jobs_.size()) || jobs_[l.job].reported_done || l.partner >= 0)
      throw InputError(fmt::format("lease for job {}: not a job of this cluster, over, or shared", l.job));
    RunningJob& r = jobs_[l.job];
    leased[l.job] = 1;
    std::vector<int> servers;
    for (int g : l.gpus) servers.push_back(server_up(l.gpu_type, g / cluster_.gpus_per_server));
    std::sort(servers.begin(), servers.end());
    servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
    r.renewed = r.gpu_type == l.gpu_type && r.servers == servers;
    r.gpu_type = l.gpu_type;
    r.servers = std::move(servers);
  }
  // Preempted: a checkpoint, then off its GPUs.
  for (std::size_t id = 0; id < jobs_.size(); ++id)
    if (!leased[id] && jobs_[id].gpu_type >= 0) {
      jobs_[id].checkpoint = jobs_[id].steps_done;
      jobs_[id].since_checkpoint_s = 0.0;
      jobs_[id].gpu_type = -1;
      jobs_[id].servers.clear();
    }
}

std::vector<JobProgress> EmulatedBackend::end_round(double round_s) {
  std::vector<JobProgress> out;
  for (RunningJob& r : jobs_) {
    if (r.reported_done) continue;
    JobProgress p{r.job.id, JobStatus::kWaiting, r.steps_done, 0.0, {}};
    if (r.gpu_type >= 0 && !r.done) {
      const double rate = cluster_.truth.at(r.job.type, r.gpu_type);
      const double start = r.renewed ? 0.0 : std::min(cluster_.restart_s, round_s);
      const double need = rate > 0.0 ? (r.job.steps - r.steps_done) / rate : INFINITY;
      const double run = std::min(round_s - start, need);
      r.steps_done = run >= need ? r.job.steps : r.steps_done + run * rate;
      r.done = run >= need;
      // A checkpoint every checkpoint_s of running: the last one taken is `back` seconds ago.
      r.since_checkpoint_s += run;
      if (r.since_checkpoint_s >= cluster_.checkpoint_s) {
        const double back = std::fmod(r.since_checkpoint_s, cluster_.checkpoint_s);
        r.checkpoint = std::max(r.checkpoint, r.steps_done - back * rate);
        r.since_checkpoint_s = back;
      }
      p.steps_done = r.steps_done;
      p.ran_s = start + run;
      p.status = r.done ? JobStatus::kFinished : JobStatus::kRunning;
      for (int s : r.servers) p.detail += fmt::format("{}{}/{}", p.detail.empty() ? "" : ",", cluster_.truth.gpu_types[r.gpu_type], s);
      if (r.done) r.reported_done = true, r.gpu_type = -1, r.servers.clear();
    }
    out.push_back(std::move(p));
  }
  now_s_ += round_s;
  return out;
}

}  // namespace perseus::cluster
