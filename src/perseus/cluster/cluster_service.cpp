#include "perseus/cluster/cluster_service.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <set>

#include <fmt/format.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {
namespace {

using json = nlohmann::json;
using server::ApiError;
using server::ApiRequest;
using server::ApiResponse;
using server::error_response;
using server::json_response;
using server::logfmt_value;

// The matrix the scheduler starts from: the given one with what earlier servers measured.
ThroughputMatrix with_measurements(ThroughputMatrix matrix, const SchedulerState& state) {
  if (!state.steps_per_s.empty()) matrix.steps_per_s = state.steps_per_s;
  return matrix;
}

json matrix_rows(const ThroughputMatrix& matrix) {
  json rows = json::object();
  for (int m = 0; m < matrix.num_job_types(); ++m) rows[matrix.job_types[m].name()] = matrix.steps_per_s[m];
  return rows;
}

// The POST /jobs body as a request; ApiError 400 naming the field that is wrong.
JobRequest parse_submission(const std::string& body, const ThroughputMatrix& matrix, const PolicySpec& policy,
                            bool require_command, int id) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ApiError(400, "the body must be a JSON object, e.g. {\"type\": ..., \"steps\": ...}");
  static const std::set<std::string> kFields = {"type", "steps", "weight", "slo_s", "entity", "command"};
  for (const auto& [key, value] : j.items())
    if (!kFields.count(key)) throw ApiError(400, fmt::format("unknown field '{}' (known: type, steps, weight, slo_s, entity, command)", key));
  const auto number = [&](const char* name, double fallback) {
    if (!j.contains(name)) return fallback;
    if (!j[name].is_number()) throw ApiError(400, fmt::format("'{}' must be a number", name));
    return j[name].get<double>();
  };
  const auto text = [&](const char* name) {
    if (!j.contains(name)) return std::string();
    if (!j[name].is_string()) throw ApiError(400, fmt::format("'{}' must be a string", name));
    return j[name].get<std::string>();
  };
  if (!j.contains("type")) throw ApiError(400, "'type' is missing: a job type of the matrix (GET /throughputs lists them)");
  if (!j.contains("steps")) throw ApiError(400, "'steps' is missing: the iterations the job runs");
  JobRequest r;
  try {
    r.type = matrix.job_index(text("type"));
  } catch (const InputError& e) {
    throw ApiError(400, fmt::format("'type': {}", e.what()));
  }
  r.steps = number("steps", 0.0);
  r.weight = number("weight", 1.0);
  r.slo_s = number("slo_s", Job::kNoSlo);
  if (j.contains("slo_s") && !(r.slo_s > 0.0)) throw ApiError(400, fmt::format("'slo_s' {}: must be > 0 seconds", r.slo_s));
  if (const std::string name = text("entity"); !name.empty()) {
    r.entity = find_entity(entities_of(policy), name);
    if (r.entity < 0) throw ApiError(400, fmt::format("'entity' '{}': not one of the policy's entities", name));
  } else {
    r.entity = dealt_entity(static_cast<std::size_t>(id), policy);
  }
  r.command = text("command");
  if (require_command && r.command.empty()) throw ApiError(400, "'command' is missing: this cluster runs each job's command");
  for (char c : r.command)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') throw ApiError(400, "'command' must be one line");
  try {
    check_job_request(r, matrix, policy);
  } catch (const InputError& e) {
    throw ApiError(400, e.what());
  }
  return r;
}

}  // namespace

ClusterService::ClusterService(ThroughputMatrix matrix, ClusterBackend& backend, SchedulerOptions options,
                               ClusterServiceOptions service)
    : given_(std::move(matrix)),
      backend_(backend),
      options_(std::move(options)),
      service_(std::move(service)),
      lock_(service_.db_path),
      store_(service_.db_path, given_),
      log_(service_.logger ? service_.logger : std::make_shared<spdlog::logger>("cluster", std::make_shared<spdlog::sinks::null_sink_mt>())) {
  const SchedulerState state = store_.load_state();
  if (!state.steps_per_s.empty() &&
      (state.steps_per_s.size() != given_.steps_per_s.size() || state.measurements.size() != given_.steps_per_s.size()))
    throw InputError(fmt::format("{}: the saved throughputs are not this matrix's shape", service_.db_path));
  ThroughputMatrix start = with_measurements(given_, state);
  scheduler_ = std::make_unique<ClusterScheduler>(start, backend_, options_);
  std::vector<ScheduledJob> jobs;
  for (const json& j : store_.load_jobs()) {
    try {
      jobs.push_back(job_from_json(j, given_, options_.policy));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", service_.db_path, e.what()));
    }
  }
  if (!jobs.empty() || state.rounds > 0) {
    std::vector<std::vector<int>> counts = state.measurements;
    if (counts.empty()) counts.assign(given_.job_types.size(), std::vector<int>(given_.gpu_types.size(), 0));
    scheduler_->restore(state.clock_s, std::move(jobs), std::move(counts));
  }
  // Cancellations asked for before a restart are applied at the first round.
  for (const ScheduledJob& j : scheduler_->jobs())
    if (j.cancel_requested && !is_over(j.status)) cancels_.push_back(j.id);
  rounds_before_ = state.rounds;
  clock_s_ = state.clock_s;
  rounds_ = state.rounds;
  publish(nullptr);
  if (!jobs_.empty())
    log_->info("event=restored db={} jobs={} rounds={} clock_s={}", logfmt_value(service_.db_path), jobs_.size(), rounds_, clock_s_);
}

ClusterService::~ClusterService() { stop(false); }

void ClusterService::publish(const RoundLog* log) {
  const ClusterScheduler& s = *scheduler_;
  const ThroughputMatrix& matrix = s.matrix();
  std::vector<json> jobs;
  jobs.reserve(s.jobs().size());
  for (const ScheduledJob& j : s.jobs()) jobs.push_back(job_to_json(j, given_, options_.policy));

  json shares = json::array();
  for (std::size_t k = 0; k < s.allocated_jobs().size(); ++k) {
    json share = json::object();
    for (std::size_t g = 0; g < given_.gpu_types.size(); ++g) share[given_.gpu_types[g]] = s.allocation()[k][g];
    shares.push_back({{"id", s.allocated_jobs()[k]}, {"share", share}});
  }
  json leases = json::array();
  if (log)
    for (const Lease& l : log->leases)
      leases.push_back({{"id", l.job}, {"gpu", given_.gpu_types[static_cast<std::size_t>(l.gpu_type)]}, {"gpus", l.gpus},
                        {"renewed", l.renewed}, {"partner", l.partner >= 0 ? json(l.partner) : json(nullptr)}, {"pace", l.pace}});
  json pairs = json::array();
  for (const SharedShare& p : s.allocated_pairs()) {
    json share = json::object();
    for (std::size_t g = 0; g < given_.gpu_types.size(); ++g) share[given_.gpu_types[g]] = p.share[g];
    pairs.push_back({{"ids", {p.first, p.second}}, {"share", share}});
  }
  json allocation = {{"round", log ? json(rounds_before_ + log->index) : json(nullptr)},
                     {"gpu_types", given_.gpu_types},
                     {"jobs", shares},
                     {"pairs", pairs},
                     {"leases", leases},
                     {"gap", s.allocation_gap()}};
  json throughputs = {{"gpu_types", given_.gpu_types},
                      {"given", matrix_rows(given_)},
                      {"measured", matrix_rows(matrix)},
                      {"measurements", json::object()}};
  for (int m = 0; m < matrix.num_job_types(); ++m) throughputs["measurements"][matrix.job_types[m].name()] = s.measurements()[m];

  // Saved before it is shown: what a client saw survives a restart. Under the lock, with the
  // cancellations asked for during the round marked: one asked for after this is saved after it.
  std::lock_guard lock(mutex_);
  for (int id : cancels_)
    if (static_cast<std::size_t>(id) < jobs.size()) jobs[static_cast<std::size_t>(id)]["cancel_requested"] = true;
  if (log) {
    std::vector<std::pair<int, json>> changed;
    std::set<int> ended(log->finished.begin(), log->finished.end());
    ended.insert(log->failed.begin(), log->failed.end());
    for (const ScheduledJob& j : s.jobs())
      if (ended.count(j.id) || j.status == JobStatus::kWaiting || j.status == JobStatus::kRunning)
        changed.emplace_back(j.id, jobs[static_cast<std::size_t>(j.id)]);
    store_.save_round(changed, {s.now_s(), rounds_before_ + s.rounds_run(), matrix.steps_per_s, s.measurements()});
  }
  // Jobs submitted during the round are not the scheduler's yet: keep their entries.
  for (std::size_t k = jobs.size(); k < jobs_.size(); ++k) jobs.push_back(std::move(jobs_[k]));
  jobs_ = std::move(jobs);
  if (log || allocation_.is_null()) allocation_ = std::move(allocation);  // a failed round leaves the last one shown
  throughputs_ = std::move(throughputs);
  topology_ = s.topology();
  clock_s_ = s.now_s();
  rounds_ = rounds_before_ + s.rounds_run();
  busy_ = !s.idle() || !pending_.empty() || !cancels_.empty();
}

void ClusterService::run_round() {
  std::vector<JobRequest> pending;
  std::vector<int> cancels;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
    cancels.swap(cancels_);
  }
  for (JobRequest& r : pending) scheduler_->submit(std::move(r));  // checked when submitted
  for (int id : cancels) {
    // Checked when asked for; a job that ended since is left as it ended.
    try {
      if (scheduler_->cancel(id)) log_->info("event=cancelled id={}", id);
    } catch (const std::exception& e) {
      log_->error("event=cancel_failed id={} error={}", id, logfmt_value(e.what()));
    }
  }
  try {
    const RoundLog& log = scheduler_->run_round();
    publish(&log);
    {
      std::lock_guard lock(mutex_);
      last_error_.clear();
    }
    log_->info("event=round index={} leases={} reallocated={} finished={} failed={}", rounds_before_ + log.index, log.leases.size(), log.reallocated,
               log.finished.size(), log.failed.size());
  } catch (const std::exception& e) {
    // The submissions are the scheduler's now: show them (and the error) though the round failed.
    publish(nullptr);
    log_->error("event=round_failed error={}", logfmt_value(e.what()));
    std::lock_guard lock(mutex_);
    last_error_ = e.what();
  }
}

void ClusterService::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void ClusterService::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || busy_; });
      if (stopping_) return;
    }
    const auto started = std::chrono::steady_clock::now();
    run_round();
    std::unique_lock lock(mutex_);
    // A round that failed is tried again after a second at least, not in a busy loop.
    const double wait_s = last_error_.empty() ? service_.min_round_wall_s : std::max(service_.min_round_wall_s, 1.0);
    const auto until = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_s));
    if (wake_.wait_until(lock, until, [&] { return stopping_; })) return;
  }
}

void ClusterService::stop(bool preempt) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  backend_.interrupt();
  if (thread_.joinable()) thread_.join();
  if (preempt && !scheduler_->idle()) {
    backend_.preempt_all();
    log_->info("event=preempted jobs_unfinished=true");
  }
}

std::size_t ClusterService::job_count() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

int ClusterService::rounds_run() const {
  std::lock_guard lock(mutex_);
  return rounds_;
}

ApiResponse ClusterService::submit(const ApiRequest& request) {
  if (!service_.token.empty()) server::require_bearer_token(request, service_.token);
  std::unique_lock lock(mutex_);
  const int id = static_cast<int>(jobs_.size());
  JobRequest r = parse_submission(request.body, given_, options_.policy, service_.require_command, id);
  ScheduledJob job;
  job.id = id;
  job.submitted_s = clock_s_;  // the scheduler's clock until the next round, which takes it
  job.request = r;
  json shown = job_to_json(job, given_, options_.policy);
  store_.add_job(id, shown);
  jobs_.push_back(shown);
  pending_.push_back(std::move(r));
  busy_ = true;
  lock.unlock();
  wake_.notify_all();
  log_->info("event=submitted id={} type={} steps={}", id, logfmt_value(shown["type"].get<std::string>()), job.request.steps);
  return json_response(201, shown);
}

ApiResponse ClusterService::cancel(const ApiRequest& request, std::size_t id) {
  if (!service_.token.empty()) server::require_bearer_token(request, service_.token);
  std::unique_lock lock(mutex_);
  json& shown = jobs_[id];
  const std::string status = shown["status"].get<std::string>();
  if (status != "waiting" && status != "running")
    throw ApiError(409, fmt::format("job {} is {}: only a waiting or running job can be cancelled", id, status));
  if (std::find(cancels_.begin(), cancels_.end(), static_cast<int>(id)) == cancels_.end()) {
    shown["cancel_requested"] = true;
    store_.add_job(static_cast<int>(id), shown);
    cancels_.push_back(static_cast<int>(id));
    busy_ = true;
  }
  json answer = shown;
  lock.unlock();
  wake_.notify_all();
  log_->info("event=cancel_requested id={}", id);
  return json_response(202, answer);
}

ApiResponse ClusterService::route(const ApiRequest& request) {
  const std::string& path = request.path;
  const auto only = [&](const char* method) {
    if (request.method != method)
      throw ApiError(405, fmt::format("method {} not allowed on {}; use {}", request.method.substr(0, 16), path.substr(0, 200), method));
  };
  if (path == "/healthz") {
    only("GET");
    return json_response(200, {{"status", "ok"}});
  }
  if (path == "/jobs") {
    if (request.method == "POST") return submit(request);
    only("GET");
    const auto status = request.query.find("status");
    if (status != request.query.end() &&
        std::none_of(std::begin(kJobStatuses), std::end(kJobStatuses), [&](JobStatus s) { return to_string(s) == status->second; }))
      throw ApiError(400, fmt::format("status '{}': waiting, running, finished, failed or cancelled", status->second.substr(0, 32)));
    json out = json::array();
    std::lock_guard lock(mutex_);
    for (const json& j : jobs_)
      if (status == request.query.end() || j["status"] == status->second) out.push_back(j);
    return json_response(200, {{"jobs", out}});
  }
  if (path.rfind("/jobs/", 0) == 0) {
    if (request.method != "GET" && request.method != "DELETE")
      throw ApiError(405, fmt::format("method {} not allowed on {}; use GET or DELETE", request.method.substr(0, 16), path.substr(0, 200)));
    const std::string id = path.substr(6);
    std::size_t k = 0;
    const bool digits = !id.empty() && id.size() < 10 && id.find_first_not_of("0123456789") == std::string::npos;
    if (digits) k = std::stoul(id);
    {
      std::lock_guard lock(mutex_);
      if (!digits || k >= jobs_.size()) throw ApiError(404, fmt::format("no job '{}'", id.substr(0, 32)));
      if (request.method == "GET") return json_response(200, jobs_[k]);
    }
    return cancel(request, k);
  }
  if (path == "/allocation") {
    only("GET");
    std::lock_guard lock(mutex_);
    return json_response(200, allocation_);
  }
  if (path == "/throughputs") {
    only("GET");
    std::lock_guard lock(mutex_);
    return json_response(200, throughputs_);
  }
  if (path == "/status") {
    only("GET");
    std::lock_guard lock(mutex_);
    json counts = json::object();
    for (JobStatus s : kJobStatuses) counts[std::string(to_string(s))] = 0;
    for (const json& j : jobs_) counts[j["status"].get<std::string>()] = counts[j["status"].get<std::string>()].get<int>() + 1;
    return json_response(200, {{"policy", to_string(options_.policy.policy)},
                               {"heterogeneity_aware", options_.policy.heterogeneity_aware},
                               {"round_s", options_.round_s},
                               {"rounds", rounds_},
                               {"clock_s", clock_s_},
                               {"gpu_types", given_.gpu_types},
                               {"workers", topology_.workers},
                               {"gpus_per_server", topology_.gpus_per_server},
                               {"jobs", counts},
                               {"last_error", last_error_.empty() ? json(nullptr) : json(last_error_)}});
  }
  throw ApiError(404, fmt::format("no route {} {}", request.method.substr(0, 16), path.substr(0, 200)));
}

void ClusterService::handle_async(const ApiRequest& request, Responder respond) {
  ApiResponse response;
  try {
    response = route(request);
  } catch (const ApiError& e) {
    response = error_response(e.status(), e.what());
  } catch (const std::exception& e) {
    log_->error("event=internal_error path={} error={}", logfmt_value(request.path.substr(0, 200)), logfmt_value(e.what()));
    response = error_response(500, std::string("internal error: ") + e.what());
  }
  if (response.status >= 400)
    log_->info("event=request method={} path={} status={}", logfmt_value(request.method.substr(0, 16)),
               logfmt_value(request.path.substr(0, 200)), response.status);
  respond(std::move(response));
}

ApiResponse ClusterService::handle(const ApiRequest& request) {
  ApiResponse out;
  handle_async(request, [&](ApiResponse response) { out = std::move(response); });
  return out;
}

void ClusterService::record_rejected(const ApiRequest& request, int status) {
  log_->info("event=request method={} path={} status={} detail=\"refused by the HTTP layer\"",
             logfmt_value(request.method.substr(0, 16)), logfmt_value(request.path.substr(0, 200)), status);
}

}  // namespace perseus::cluster
