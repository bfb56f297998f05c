#include "perseus/cluster/emulated_backend.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace perseus::cluster {
namespace {

constexpr double kForever = std::numeric_limits<double>::infinity();

// The lower convex hull of (steps/s, W) points, slowest first (Andrew's monotone chain): the least
// power a job can draw at each average speed by mixing operating points over time.
std::vector<std::pair<double, double>> lower_hull(std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  std::vector<std::pair<double, double>> hull;
  for (const auto& p : points) {
    while (hull.size() >= 2) {
      const auto& [x1, y1] = hull[hull.size() - 2];
      const auto& [x2, y2] = hull.back();
      // Drop the last point unless it lies strictly below the segment from its predecessor to p.
      if ((x2 - x1) * (p.second - y1) - (y2 - y1) * (p.first - x1) > 0.0) break;
      hull.pop_back();
    }
    if (!hull.empty() && hull.back().first == p.first) continue;  // the same speed: the lower power came first
    hull.push_back(p);
  }
  return hull;
}

}  // namespace

EmulatedBackend::EmulatedBackend(EmulatedCluster cluster) : cluster_(std::move(cluster)) {
  if (static_cast<int>(cluster_.workers.size()) != cluster_.truth.num_gpu_types())
    throw InputError(fmt::format("the emulated cluster has {} GPU counts, the throughputs {} GPU types", cluster_.workers.size(),
                                 cluster_.truth.num_gpu_types()));
  check_workers(cluster_.workers, cluster_.gpus_per_server);
  if (!(cluster_.restart_s >= 0.0)) throw InputError(fmt::format("restart time {} s: must be >= 0", cluster_.restart_s));
  if (!(cluster_.checkpoint_s > 0.0)) throw InputError(fmt::format("checkpoint period {} s: must be > 0", cluster_.checkpoint_s));
  for (int w : cluster_.workers)
    up_.emplace_back(static_cast<std::size_t>((w + cluster_.gpus_per_server - 1) / cluster_.gpus_per_server), 1);
  if (cluster_.truth.has_energy()) {
    power_curve_.resize(cluster_.truth.operating_points.size());
    for (std::size_t m = 0; m < power_curve_.size(); ++m)
      for (const std::vector<OperatingPoint>& on_type : cluster_.truth.operating_points[m]) {
        std::vector<std::pair<double, double>> points;
        for (const OperatingPoint& p : on_type) points.emplace_back(p.steps_per_s, p.steps_per_s * p.joules_per_step);
        power_curve_[m].push_back(lower_hull(std::move(points)));
      }
  }
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

void EmulatedBackend::stop(RunningJob& r) {
  r.since_checkpoint_s = 0.0;
  r.gpu_type = -1;
  r.servers.clear();
  r.where.clear();
}

void EmulatedBackend::set_server_up(int gpu_type, int server, bool up) {
  if (gpu_type < 0 || gpu_type >= static_cast<int>(up_.size()) || server < 0 || server >= static_cast<int>(up_[gpu_type].size()))
    throw InputError(fmt::format("no server {} of GPU type {}", server, gpu_type));
  up_[gpu_type][server] = up ? 1 : 0;
  if (up) return;
  for (int id : live_) {
    RunningJob& r = jobs_[static_cast<std::size_t>(id)];
    if (r.gpu_type == gpu_type && std::find(r.servers.begin(), r.servers.end(), server) != r.servers.end()) {
      r.left = r.checkpoint_left;
      stop(r);
    }
  }
  // Its leases are void: their jobs (and partners) do not run this round.
  std::erase_if(leases_, [&](const Lease& l) {
    const RunningJob& r = jobs_[static_cast<std::size_t>(l.job)];
    return r.gpu_type < 0 || (l.partner >= 0 && jobs_[static_cast<std::size_t>(l.partner)].gpu_type < 0);
  });
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
    gap.reported_done = true;
    jobs_.push_back(std::move(gap));
  }
  RunningJob r;
  r.job = job;
  r.left = r.checkpoint_left = job.steps - job.steps_done;
  jobs_.push_back(std::move(r));
  live_.push_back(job.id);
}

void EmulatedBackend::cancel(int id) {
  if (id < 0 || id >= static_cast<int>(jobs_.size()) || jobs_[static_cast<std::size_t>(id)].reported_done)
    throw InputError(fmt::format("cancel job {}: not a job of this cluster, or over", id));
  RunningJob& r = jobs_[static_cast<std::size_t>(id)];
  stop(r);
  r.reported_done = true;
  std::erase(live_, id);
}

void EmulatedBackend::begin_round(const std::vector<Lease>& leases) {
  std::vector<char> leased(jobs_.size(), 0);
  const auto check = [&](int id) {
    if (id < 0 || id >= static_cast<int>(jobs_.size()) || jobs_[static_cast<std::size_t>(id)].reported_done || leased[id])
      throw InputError(fmt::format("lease for job {}: not a job of this cluster, over, or leased twice", id));
    leased[static_cast<std::size_t>(id)] = 1;
  };
  for (const Lease& l : leases) {
    check(l.job);
    if (l.partner >= 0) check(l.partner);
    if (!(l.pace > 0.0 && l.pace <= 1.0)) throw InputError(fmt::format("lease for job {}: pace {} not in (0, 1]", l.job, l.pace));
    if (l.partner >= 0 && l.pace != 1.0) throw InputError(fmt::format("lease for jobs {} and {}: a pair runs at pace 1", l.job, l.partner));
  }
  // Preempted: a checkpoint, then off its GPUs.
  for (int id : live_)
    if (!leased[static_cast<std::size_t>(id)] && jobs_[static_cast<std::size_t>(id)].gpu_type >= 0) {
      RunningJob& r = jobs_[static_cast<std::size_t>(id)];
      r.checkpoint_left = r.left;
      stop(r);
    }
  for (const Lease& l : leases) {
    std::vector<int> servers;
    for (int g : l.gpus) servers.push_back(server_up(l.gpu_type, g / cluster_.gpus_per_server));
    std::sort(servers.begin(), servers.end());
    servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
    for (int id : {l.job, l.partner}) {
      if (id < 0) continue;
      RunningJob& r = jobs_[static_cast<std::size_t>(id)];
      if (r.gpu_type == l.gpu_type && r.servers == servers) continue;
      r.gpu_type = l.gpu_type;
      r.servers = servers;
      r.where.clear();
      for (int s : servers) r.where += fmt::format("{}{}/{}", r.where.empty() ? "" : ",", cluster_.truth.gpu_types[l.gpu_type], s);
    }
  }
  leases_ = leases;
}

double EmulatedBackend::power_at(int m, int j, double steps_per_s) const {
  if (power_curve_.empty()) return 0.0;
  const std::vector<std::pair<double, double>>& curve = power_curve_[static_cast<std::size_t>(m)][static_cast<std::size_t>(j)];
  if (curve.empty()) return 0.0;
  if (steps_per_s >= curve.back().first) return curve.back().second;
  if (steps_per_s <= curve.front().first) return curve.front().second;
  const auto hi = std::lower_bound(curve.begin(), curve.end(), std::make_pair(steps_per_s, -kForever));
  const auto lo = hi - 1;
  return lo->second + (steps_per_s - lo->first) / (hi->first - lo->first) * (hi->second - lo->second);
}

void EmulatedBackend::run_lease(const Lease& l, double round_s, std::vector<Run>& runs) {
  // A lease that is not a renewal loads its checkpoint first (both jobs of a pair at once).
  const bool renewed = l.renewed && jobs_[static_cast<std::size_t>(l.job)].gpu_type == l.gpu_type;
  const double start_s = renewed ? 0.0 : std::min(cluster_.restart_s, round_s);
  const double avail_s = round_s - start_s;
  const auto alone_rate = [&](int id) { return cluster_.truth.at(jobs_[static_cast<std::size_t>(id)].job.type, l.gpu_type); };
  // Runs job `id` alone at `rate` for up to `avail` seconds; returns the time it ran.
  const auto run_alone = [&](int id, double rate, double avail, bool& finished) {
    double& left = jobs_[static_cast<std::size_t>(id)].left;
    const double need_s = rate > 0.0 ? left / rate : kForever;
    finished = need_s <= avail;
    const double run_s = std::min(avail, need_s);
    left = finished ? 0.0 : left - run_s * rate;
    return run_s;
  };
  if (l.partner < 0) {
    RunningJob& r = jobs_[static_cast<std::size_t>(l.job)];
    const double rate = alone_rate(l.job) * l.pace, before = r.left;
    Run run{l.job, start_s};
    run.run_s = run_alone(l.job, rate, avail_s, run.finished);
    run.energy_j = (start_s + run.run_s) * power_at(r.job.type, l.gpu_type, rate);
    run.steps = before - r.left;
    runs.push_back(run);
    return;
  }
  // A pair runs at its shared speeds until one finishes, the other then alone for the rest.
  const int ids[2] = {l.job, l.partner};
  const auto rates = cluster_.truth.shared_speeds(jobs_[static_cast<std::size_t>(l.job)].job.type,
                                                  jobs_[static_cast<std::size_t>(l.partner)].job.type, l.gpu_type);
  const double shared[2] = {rates ? rates->first : 0.0, rates ? rates->second : 0.0};
  double need[2], before[2];
  for (int i = 0; i < 2; ++i) {
    before[i] = jobs_[static_cast<std::size_t>(ids[i])].left;
    need[i] = shared[i] > 0.0 ? before[i] / shared[i] : kForever;
  }
  const double together = std::min({avail_s, need[0], need[1]});
  Run out[2];
  for (int i = 0; i < 2; ++i) {
    double& left = jobs_[static_cast<std::size_t>(ids[i])].left;
    out[i] = {ids[i], start_s, together, start_s + together, 0.0, 0.0, need[i] <= together};
    left = out[i].finished ? 0.0 : left - together * shared[i];
  }
  for (int i = 0; i < 2; ++i)
    if (!out[i].finished && out[1 - i].finished) out[i].run_s += run_alone(ids[i], alone_rate(ids[i]), avail_s - together, out[i].finished);
  for (int i = 0; i < 2; ++i) {
    out[i].steps = before[i] - jobs_[static_cast<std::size_t>(ids[i])].left;
    runs.push_back(out[i]);
  }
}

std::vector<JobProgress> EmulatedBackend::end_round(double round_s) {
  std::vector<Run> runs;
  runs.reserve(2 * leases_.size());
  for (const Lease& l : leases_) run_lease(l, round_s, runs);
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.id < b.id; });
  std::vector<JobProgress> out;
  out.reserve(live_.size());
  std::size_t next_run = 0;
  for (int id : live_) {
    RunningJob& r = jobs_[static_cast<std::size_t>(id)];
    JobProgress p;
    p.id = id;
    p.steps_done = r.job.steps - r.left;
    if (next_run < runs.size() && runs[next_run].id == id) {
      const Run& run = runs[next_run++];
      p.status = run.finished ? JobStatus::kFinished : JobStatus::kRunning;
      p.steps_done = run.finished ? r.job.steps : r.job.steps - r.left;
      p.ran_s = run.start_s + run.run_s, p.shared_s = run.shared_s, p.energy_j = run.energy_j;
      p.detail = r.where;
      // A checkpoint every checkpoint_s of running: the last one taken is `back` seconds ago, at
      // the round's average speed.
      r.since_checkpoint_s += run.run_s;
      if (r.since_checkpoint_s >= cluster_.checkpoint_s) {
        const double back = std::fmod(r.since_checkpoint_s, cluster_.checkpoint_s);
        r.checkpoint_left = std::min(r.checkpoint_left, r.left + back * run.steps / std::max(run.run_s, 1e-300));
        r.since_checkpoint_s = back;
      }
      if (run.finished) {
        r.reported_done = true;
        stop(r);
      }
    }
    out.push_back(std::move(p));
  }
  std::erase_if(live_, [&](int id) { return jobs_[static_cast<std::size_t>(id)].reported_done; });
  leases_.clear();
  now_s_ += round_s;
  return out;
}

}  // namespace perseus::cluster
