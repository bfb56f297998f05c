#include "perseus/cluster/slurm_backend.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"

extern char** environ;

namespace perseus::cluster {
namespace {

namespace fs = std::filesystem;

// How long a round waits for the jobs it preempts to stop (Slurm's KillWait and the job's
// checkpoint should fit; a job on a dead node takes until Slurm declares the node down).
constexpr double kStopWait_s = 10.0;

double wall_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string slurm_error() { return slurm_strerror(slurm_get_errno()); }

// A number >= 0 a job writes to a file of its directory (progress, energy), or `otherwise`
// where there is none yet.
double read_count(const std::string& path, double otherwise) {
  std::ifstream in(path);
  double value = 0.0;
  if (in >> value && std::isfinite(value) && value >= 0.0) return value;
  return otherwise;
}

// The `gpu` GRES of a node's "gpu:v100:4(S:0),nic:1" as (type, count); count 0 when it has none.
std::pair<std::string, int> gpus_of(const char* gres) {
  if (!gres) return {"", 0};
  std::stringstream entries(gres);
  for (std::string entry; std::getline(entries, entry, ',');) {
    entry = entry.substr(0, entry.find('('));
    std::vector<std::string> fields;
    std::stringstream parts(entry);
    for (std::string part; std::getline(parts, part, ':');) fields.push_back(part);
    if (fields.size() == 3 && fields[0] == "gpu") return {fields[1], std::atoi(fields[2].c_str())};
  }
  return {"", 0};
}

bool node_up(uint32_t state) {
  const uint32_t base = state & NODE_STATE_BASE;
  if (base != NODE_STATE_IDLE && base != NODE_STATE_ALLOCATED && base != NODE_STATE_MIXED) return false;
  return (state & (NODE_STATE_DRAIN | NODE_STATE_NO_RESPOND | NODE_STATE_FAIL | NODE_STATE_POWERED_DOWN |
                   NODE_STATE_POWERING_DOWN | NODE_STATE_MAINT)) == 0;
}

std::string_view job_state_name(uint32_t state) {
  switch (state & JOB_STATE_BASE) {
    case JOB_PENDING: return "PENDING";
    case JOB_RUNNING: return "RUNNING";
    case JOB_SUSPENDED: return "SUSPENDED";
    case JOB_COMPLETE: return "COMPLETED";
    case JOB_CANCELLED: return "CANCELLED";
    case JOB_FAILED: return "FAILED";
    case JOB_TIMEOUT: return "TIMEOUT";
    case JOB_NODE_FAIL: return "NODE_FAIL";
    case JOB_PREEMPTED: return "PREEMPTED";
    case JOB_BOOT_FAIL: return "BOOT_FAIL";
    case JOB_DEADLINE: return "DEADLINE";
    case JOB_OOM: return "OUT_OF_MEMORY";
    default: return "UNKNOWN";
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// libslurm keeps its configuration in globals: read once per process.
void init_slurm(const std::string& config) {
  static std::once_flag once;
  std::call_once(once, [&] { slurm_init(config.empty() ? nullptr : config.c_str()); });
}

}  // namespace

SlurmBackend::SlurmBackend(std::vector<std::string> gpu_types, SlurmOptions options)
    : gpu_types_(std::move(gpu_types)), options_(std::move(options)), servers_(gpu_types_.size()) {
  if (options_.job_root.empty()) throw InputError("the Slurm backend needs a directory for its jobs (job_root)");
  options_.job_root = fs::absolute(options_.job_root).string();
  fs::create_directories(options_.job_root);
  init_slurm(options_.config);
  topology();  // fails early when slurmctld does not answer
  find_leftovers();
}

SlurmBackend::~SlurmBackend() = default;

ClusterTopology SlurmBackend::topology() {
  node_info_msg_t* nodes = nullptr;
  if (slurm_load_node(0, &nodes, SHOW_ALL) != SLURM_SUCCESS)
    throw SolveError(fmt::format("Slurm: cannot list the nodes: {}", slurm_error()));
  std::vector<std::vector<std::string>> servers(gpu_types_.size());
  std::string first_node;
  int per_server = 0;
  for (uint32_t i = 0; i < nodes->record_count; ++i) {
    const node_info_t& n = nodes->node_array[i];
    if (!n.name) continue;
    const auto [type, count] = gpus_of(n.gres);
    const auto known = std::find_if(gpu_types_.begin(), gpu_types_.end(),
                                    [&](const std::string& g) { return strcasecmp(g.c_str(), type.c_str()) == 0; });
    if (count <= 0 || known == gpu_types_.end()) continue;
    if (per_server == 0) {
      per_server = count, first_node = n.name;
    } else if (count != per_server) {
      const std::string name = n.name;
      slurm_free_node_info_msg(nodes);
      throw InputError(fmt::format("Slurm nodes {} ({} GPUs) and {} ({} GPUs): the scheduler needs every GPU node to hold the "
                                   "same number",
                                   first_node, per_server, name, count));
    }
    if (node_up(n.node_state)) servers[static_cast<std::size_t>(known - gpu_types_.begin())].push_back(n.name);
  }
  slurm_free_node_info_msg(nodes);
  ClusterTopology t{std::vector<int>(gpu_types_.size(), 0), std::max(per_server, 1)};
  for (std::size_t j = 0; j < servers.size(); ++j) {
    std::sort(servers[j].begin(), servers[j].end());
    t.workers[j] = static_cast<int>(servers[j].size()) * t.gpus_per_server;
  }
  servers_ = std::move(servers);
  gpus_per_server_ = t.gpus_per_server;
  return t;
}

void SlurmBackend::submit(const BackendJob& job) {
  Tracked t;
  t.job = job;
  t.dir = fmt::format("{}/job-{}", options_.job_root, job.id);
  fs::create_directories(t.dir);
  stop_leftover(t.dir);  // first: it writes its progress as it stops
  // A new job's progress starts at 0; a restored one's is its checkpoint's, in its directory.
  std::error_code ignored;
  if (job.steps_done <= 0.0) {
    fs::remove(t.dir + "/progress", ignored);
    fs::remove(t.dir + "/energy", ignored);
  }
  fs::remove(t.dir + "/pace", ignored);  // the first lease writes it
  t.steps_done = job.steps_done;
  t.energy_j = read_count(t.dir + "/energy", 0.0);

  std::string script = fmt::format("#!/bin/sh\n# perseus job {}\nexec {}\n", job.id, job.command);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("PERSEUS_", 0) != 0 && std::string_view(*e).rfind("SLURM_", 0) != 0) env.emplace_back(*e);
  env.push_back(fmt::format("PERSEUS_JOB_ID={}", job.id));
  env.push_back(fmt::format("PERSEUS_STEPS={}", job.steps));
  env.push_back("PERSEUS_JOB_DIR=" + t.dir);
  std::vector<char*> env_ptrs;
  for (std::string& e : env) env_ptrs.push_back(e.data());
  std::string name = fmt::format("perseus-{}", job.id), out = t.dir + "/slurm-%j.out", tres = fmt::format("gres:gpu:{}", job.gpus);
  // The descriptor points into these strings (libslurm takes char*): they outlive the call.
  char argv0[] = "perseus-job";
  char* argv[] = {argv0, nullptr};

  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  d.name = name.data();
  d.script = script.data();
  d.argc = 1;
  d.argv = argv;
  d.environment = env_ptrs.data();
  d.env_size = static_cast<uint32_t>(env_ptrs.size());
  d.work_dir = t.dir.data();
  d.std_out = out.data();
  d.std_err = out.data();
  d.tres_per_job = tres.data();
  d.partition = options_.partition.empty() ? nullptr : options_.partition.data();
  d.priority = 0;  // held until its first lease
  d.requeue = 1;
  d.min_nodes = 1;
  d.user_id = getuid();
  d.group_id = getgid();
  submit_response_msg_t* response = nullptr;
  if (slurm_submit_batch_job(&d, &response) != SLURM_SUCCESS)
    throw SolveError(fmt::format("Slurm refused job {} ({}): {}", job.id, job.command, slurm_error()));
  t.slurm_id = response->job_id;
  slurm_free_submit_response_response_msg(response);
  jobs_[job.id] = std::move(t);
}

void SlurmBackend::find_leftovers() {
  job_info_msg_t* info = nullptr;
  if (slurm_load_jobs(0, &info, SHOW_ALL) != SLURM_SUCCESS) throw SolveError(fmt::format("Slurm: cannot list the jobs: {}", slurm_error()));
  const std::string prefix = options_.job_root + "/job-";
  for (uint32_t i = 0; i < info->record_count; ++i) {
    const slurm_job_info_t& j = info->job_array[i];
    const uint32_t base = j.job_state & JOB_STATE_BASE;
    const bool live = base == JOB_PENDING || base == JOB_RUNNING || base == JOB_SUSPENDED || (j.job_state & JOB_COMPLETING);
    if (live && j.user_id == getuid() && j.name && std::string_view(j.name).rfind("perseus-", 0) == 0 && j.work_dir &&
        std::string_view(j.work_dir).rfind(prefix, 0) == 0)
      leftovers_[j.work_dir].push_back(j.job_id);
  }
  slurm_free_job_info_msg(info);
}

void SlurmBackend::stop_leftover(const std::string& dir) {
  const auto it = leftovers_.find(dir);
  if (it == leftovers_.end()) return;
  // As scancel: SIGTERM first (the job checkpoints), SIGKILL after Slurm's KillWait.
  for (unsigned id : it->second) slurm_kill_job(id, SIGKILL, 0);
  if (const std::set<unsigned> left = wait_until_stopped(it->second); !left.empty())
    throw SolveError(fmt::format("Slurm: job {} of a previous scheduler in {} is still stopping", *left.begin(), dir));
  leftovers_.erase(it);
}

void SlurmBackend::hold(Tracked& t) {
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  d.job_id = t.slurm_id;
  d.priority = 0;
  // A job that just ended cannot be held: nothing to do.
  if (slurm_update_job(&d) == SLURM_SUCCESS) t.released = false;
}

bool SlurmBackend::requeue_held(Tracked& t) {
  // Fails when the job already ended or is pending (not started): then there is nothing to stop.
  const bool stopped = slurm_requeue(t.slurm_id, JOB_REQUEUE_HOLD) == SLURM_SUCCESS;
  t.released = false;
  return stopped;
}

std::set<unsigned> SlurmBackend::wait_until_stopped(const std::vector<unsigned>& slurm_ids) {
  // A requeued job completes for a moment (its program checkpointing after SIGTERM); only then
  // are its GPUs free and its checkpoint written, and an update made before then is undone (the
  // requeue's begin-time delay is set when it completes). One on a node that died completes only
  // once Slurm declares the node down: those are left for a later round.
  const double deadline = wall_s() + kStopWait_s;
  std::set<unsigned> stopping(slurm_ids.begin(), slurm_ids.end());
  while (!stopping.empty()) {
    for (auto it = stopping.begin(); it != stopping.end();) {
      job_info_msg_t* info = nullptr;
      bool settled = true;
      if (slurm_load_job(&info, *it, SHOW_ALL) == SLURM_SUCCESS && info->record_count > 0) {
        const uint32_t state = info->job_array[0].job_state;
        settled = (state & JOB_STATE_BASE) != JOB_RUNNING && (state & JOB_COMPLETING) == 0;
      }
      if (info) slurm_free_job_info_msg(info);
      it = settled ? stopping.erase(it) : std::next(it);
    }
    if (stopping.empty() || wall_s() > deadline) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_s / 5.0));
  }
  return stopping;
}

void SlurmBackend::release_on(Tracked& t, const std::vector<std::string>& nodes) {
  std::string list = joined(nodes);
  // A job just requeued is still completing for a moment (its process getting SIGTERM and
  // checkpointing); Slurm refuses updates until then, so ask again.
  const double deadline = wall_s() + 30.0;
  for (;;) {
    job_desc_msg_t d;
    slurm_init_job_desc_msg(&d);
    d.job_id = t.slurm_id;
    d.req_nodes = list.data();
    d.min_nodes = d.max_nodes = static_cast<uint32_t>(nodes.size());
    d.begin_time = time(nullptr);  // a requeued job would otherwise wait Slurm's requeue delay
    d.priority = INFINITE;         // release
    if (slurm_update_job(&d) == SLURM_SUCCESS) break;
    const int error = slurm_get_errno();
    // It ended since the last round's report: end_round reports it.
    if (error == ESLURM_JOB_FINISHED || error == ESLURM_ALREADY_DONE || error == ESLURM_INVALID_JOB_ID) return;
    // Released last round and still pending when this round's requeue was refused, it may have
    // started on its old nodes since (Slurm refuses a running job new nodes, "Invalid node
    // name"): stop it there, then ask again.
    if (requeue_held(t)) wait_until_stopped({t.slurm_id});
    if (wall_s() > deadline)
      throw SolveError(fmt::format("Slurm: cannot start job {} (Slurm job {}) on {}: {}", t.job.id, t.slurm_id, list, slurm_error()));
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_s));
  }
  t.nodes = nodes;
  t.released = true;
}

void SlurmBackend::begin_round(const std::vector<Lease>& leases) {
  round_start_ = wall_s();
  std::map<int, std::vector<std::string>> placed;
  for (const Lease& l : leases) {
    const auto it = jobs_.find(l.job);
    if (it == jobs_.end() || l.partner >= 0 || l.gpu_type < 0 || l.gpu_type >= static_cast<int>(servers_.size()))
      throw InputError(fmt::format("lease for job {}: not a job of this backend, shared, or on an unknown GPU type", l.job));
    if (!(l.pace > 0.0 && l.pace <= 1.0)) throw InputError(fmt::format("lease for job {}: pace {} not in (0, 1]", l.job, l.pace));
    std::set<std::string> nodes;
    for (int g : l.gpus) {
      const std::size_t server = static_cast<std::size_t>(g / gpus_per_server_);
      if (server >= servers_[l.gpu_type].size())
        throw InputError(fmt::format("lease for job {}: GPU {} of {} is not up", l.job, g, gpu_types_[l.gpu_type]));
      nodes.insert(servers_[l.gpu_type][server]);
    }
    placed[l.job] = std::vector<std::string>(nodes.begin(), nodes.end());
  }
  // Once every lease is checked: a bad one writes nothing.
  for (const Lease& l : leases) {
    Tracked& t = jobs_.at(l.job);
    if (!t.over) set_pace(t, l.pace);
  }
  // Preempt first, so that the GPUs are free for the jobs that start.
  std::vector<unsigned> stopping;
  for (auto& [id, t] : jobs_) {
    if (t.over || !t.released) continue;
    const auto lease = placed.find(id);
    if (lease != placed.end() && lease->second == t.nodes) continue;  // renewed: keeps running
    t.reported_s = -1.0;
    if (requeue_held(t)) {
      stopping.push_back(t.slurm_id);
    } else {
      // Pending (released and not started yet, or requeued by Slurm after its node failed):
      // held, so that Slurm does not start it on its old nodes before it is moved.
      hold(t);
    }
  }
  const std::set<unsigned> still_stopping = wait_until_stopped(stopping);
  // A job released on these nodes already and still waiting for its begin time is released
  // again: a requeue that completed since (after its node failed) has set Slurm's requeue delay.
  for (auto& [id, nodes] : placed) {
    Tracked& t = jobs_.at(id);
    if (t.over || still_stopping.count(t.slurm_id)) continue;
    if (!(t.released && t.nodes == nodes && !t.delayed)) release_on(t, nodes);
  }
}

double SlurmBackend::read_progress(const Tracked& t) const {
  return read_count(t.dir + "/progress", t.steps_done);  // not written yet: as it was
}

void SlurmBackend::set_pace(Tracked& t, double pace) {
  if (pace == t.pace) return;
  // Written before the job starts or, on a renewed lease, while it runs: by rename, so that
  // the job never reads half a number.
  write_file_atomically(t.dir + "/pace", fmt::format("{:.17g}\n", pace));
  t.pace = pace;
}

std::vector<JobProgress> SlurmBackend::end_round(double round_s) {
  const double end = round_start_ + round_s;
  for (double now = wall_s(); now < end && !interrupted_; now = wall_s())
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(end - now, options_.poll_s)));
  job_info_msg_t* info = nullptr;
  if (slurm_load_jobs(0, &info, SHOW_ALL) != SLURM_SUCCESS)
    throw SolveError(fmt::format("Slurm: cannot list the jobs: {}", slurm_error()));
  std::map<unsigned, const slurm_job_info_t*> by_slurm_id;
  for (uint32_t i = 0; i < info->record_count; ++i) by_slurm_id[info->job_array[i].job_id] = &info->job_array[i];
  const double now = wall_s();
  std::vector<JobProgress> out;
  for (auto& [id, t] : jobs_) {
    if (t.over) continue;
    JobProgress p;
    p.id = id;
    t.steps_done = read_progress(t);
    p.steps_done = t.steps_done;
    // The job's energy counter: what it drew since the last report (none from a job that
    // keeps none; a counter that went back, a job that lost it, counts from there).
    const double energy = read_count(t.dir + "/energy", t.energy_j);
    p.energy_j = energy >= t.energy_j ? energy - t.energy_j : energy;
    t.energy_j = energy;
    const auto found = by_slurm_id.find(t.slurm_id);
    if (found == by_slurm_id.end()) {
      p.status = JobStatus::kFailed;
      p.detail = fmt::format("Slurm job {} is gone from slurmctld", t.slurm_id);
    } else {
      const slurm_job_info_t& j = *found->second;
      const double began = std::max(round_start_, static_cast<double>(j.start_time));
      t.delayed = false;
      switch (j.job_state & JOB_STATE_BASE) {
        case JOB_RUNNING:
          p.status = JobStatus::kRunning;
          // Renewed: it ran since its last report, which its steps are counted from (more than
          // round_s when the round started late: a measurement over round_s would be too fast).
          p.ran_s = t.reported_s >= 0.0 ? std::max(0.0, now - std::max(t.reported_s, static_cast<double>(j.start_time)))
                                        : std::clamp(now - began, 0.0, round_s);
          t.reported_s = now;
          p.detail = j.nodes ? j.nodes : "";
          break;
        case JOB_PENDING:
        case JOB_SUSPENDED:
          p.status = JobStatus::kWaiting;
          t.delayed = j.state_reason == WAIT_TIME;
          break;
        case JOB_COMPLETE:
          if (WIFEXITED(j.exit_code) && WEXITSTATUS(j.exit_code) == 0) {
            p.status = JobStatus::kFinished;
            p.steps_done = t.steps_done = std::max(t.steps_done, t.job.steps);
            p.ran_s = std::clamp(static_cast<double>(j.end_time) - began, 0.0, round_s);
            p.detail = j.nodes ? j.nodes : "";
            break;
          }
          [[fallthrough]];
        default:
          p.status = JobStatus::kFailed;
          p.detail = fmt::format("Slurm job {} ended {} (exit {}); its output: {}/slurm-{}.out", t.slurm_id, job_state_name(j.job_state),
                                 WIFEXITED(j.exit_code) ? WEXITSTATUS(j.exit_code) : -1, t.dir, t.slurm_id);
      }
    }
    if (p.status != JobStatus::kRunning) t.reported_s = -1.0;
    if (p.status == JobStatus::kFinished || p.status == JobStatus::kFailed) t.over = true;
    out.push_back(std::move(p));
  }
  slurm_free_job_info_msg(info);
  return out;
}

unsigned SlurmBackend::slurm_id(int job) const {
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.slurm_id;
}

const std::vector<std::string>& SlurmBackend::nodes_of(int job) const {
  static const std::vector<std::string> kNone;
  const auto it = jobs_.find(job);
  return it == jobs_.end() ? kNone : it->second.nodes;
}

void SlurmBackend::cancel(int id) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.over) throw InputError(fmt::format("cancel job {}: not a job of this backend, or over", id));
  Tracked& t = it->second;
  t.over = true;  // never reported again, whatever Slurm says next
  t.released = false;
  // A job that already ended (between the round's report and now) has nothing left to kill.
  // One slow to stop still ends (Slurm kills it after KillWait); a job leased its GPUs meanwhile
  // waits for them in Slurm's queue.
  if (slurm_kill_job(t.slurm_id, SIGKILL, 0) == SLURM_SUCCESS) wait_until_stopped({t.slurm_id});
}

void SlurmBackend::preempt_all() {
  for (auto& [id, t] : jobs_)
    if (!t.over && t.released) {
      requeue_held(t);
      hold(t);
    }
}

}  // namespace perseus::cluster
