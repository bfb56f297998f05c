#include "perseus/server/service.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/server/job.hpp"
#include "perseus/server/web_page.hpp"
#include "perseus/server/zeus_dump.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Frontier computations a job may start without one finishing: one that takes the process
// down (a crash, the OOM killer) would otherwise be retried by every restart, forever.
constexpr int kMaxComputeAttempts = 2;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::optional<std::string> query_value(const ApiRequest& request, const char* name) {
  const auto it = request.query.find(name);
  if (it == request.query.end()) return std::nullopt;
  return it->second;
}

int query_int(const ApiRequest& request, const char* name, long long min_value, long long max_value) {
  const auto text = query_value(request, name);
  if (!text) throw ApiError(422, fmt::format("query parameter '{}': required", name));
  long long value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty()) {
    throw ApiError(422, fmt::format("query parameter '{}': expected an integer, got '{}'", name, text->substr(0, 40)));
  }
  if (value < min_value || value > max_value) {
    throw ApiError(422, fmt::format("query parameter '{}': must be in [{}, {}], got {}", name, min_value, max_value, value));
  }
  return static_cast<int>(value);
}

std::optional<double> query_positive(const ApiRequest& request, const char* name) {
  const auto text = query_value(request, name);
  if (!text) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty() || !std::isfinite(value) ||
      value <= 0) {
    throw ApiError(422, fmt::format("query parameter '{}': expected a positive number, got '{}'", name,
                                    text->substr(0, 40)));
  }
  return value;
}

JobInfo job_info_from_store(const json& stored) {
  JobInfo info;
  info.job_id = stored.at("job_id").get<std::string>();
  info.pp_degree = stored.at("pp_degree").get<int>();
  info.dp_degree = stored.at("dp_degree").get<int>();
  info.tp_degree = stored.at("tp_degree").get<int>();
  info.world_size = stored.at("world_size").get<int>();
  if (stored.contains("job_metadata") && stored.at("job_metadata").is_string()) {
    info.job_metadata = stored.at("job_metadata").get<std::string>();
  }
  if (stored.contains("microbatches")) info.layout = parse_layout(stored, "stored JobInfo");
  return info;
}

}  // namespace

// A rank parked at the barrier: its request is answered when the round is released, when
// its wait exceeds --barrier-timeout, or when the job or the server goes away. No thread
// waits for it.
struct Service::Waiter {
  int rank = 0;
  RankInfo info;
  Responder respond;
  std::optional<Clock::time_point> deadline;
};

// One barrier round, guarded by its job's mutex. finish() records the outcome once; the
// waiters are taken out under the mutex and answered after it is released (answer()), so
// that building a thousand answers does not hold up the job.
struct Service::Round {
  bool finished = false;
  std::shared_ptr<const Deployment> deployment;
  std::optional<ApiError> error;
  std::vector<Waiter> waiters;

  // Once per round; returns the waiters to answer.
  std::vector<Waiter> finish(std::shared_ptr<const Deployment> plan, std::optional<ApiError> failure) {
    if (finished) return {};
    finished = true;
    deployment = std::move(plan);
    error = std::move(failure);
    return std::exchange(waiters, {});
  }
};

struct Service::Job {
  JobInfo info;
  std::string scheduler_name;
  double created_at = 0.0;
  std::atomic<double> last_active{0.0};
  double persisted_active = 0.0;  // housekeeping thread only
  std::atomic<bool> removed{false};

  std::mutex mutex;  // everything below
  std::map<int, RankInfo> ranks;
  JobLifecycle lifecycle;  // the phase and its scheduler, the layout, the profile's computations

  // The schedule barrier: a round is released when every rank has asked.
  std::vector<char> arrived;
  int arrived_count = 0;
  std::uint64_t generation = 0;
  Clock::time_point round_started;
  std::shared_ptr<const Deployment> deployment;  // the latest round's
  std::shared_ptr<Round> round = std::make_shared<Round>();  // the round ranks are waiting for
  std::optional<DumpRound> dump_round;  // --dump-data: the latest round's files, until complete
};


struct Service::ComputeTask {
  JobPtr job;
  std::uint64_t version = 0;
  FrontierInputs inputs;
  std::optional<EnergyProblem> problem;
};

Service::Service(ServiceOptions options)
    : options_(std::move(options)), db_lock_(options_.db_path), store_(options_.db_path), started_(Clock::now()) {
  log_ = options_.logger ? options_.logger
                         : std::make_shared<spdlog::logger>("perseus-server", std::make_shared<spdlog::sinks::null_sink_mt>());
  recover();
  worker_ = std::thread([this] { worker_loop(); });
  housekeeper_ = std::thread([this] { housekeeping_loop(); });
}

Service::~Service() { shutdown(); }

void Service::shutdown() {
  {
    std::lock_guard lock(work_mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  shutting_down_ = true;
  work_cv_.notify_all();
  housekeeping_cv_.notify_all();
  std::vector<std::pair<std::shared_ptr<Round>, std::vector<Waiter>>> parked;
  {
    std::shared_lock lock(jobs_mutex_);
    for (const auto& [id, job] : jobs_) {
      std::lock_guard job_lock(job->mutex);
      parked.emplace_back(job->round, job->round->finish(nullptr, ApiError(503, "the server is shutting down")));
    }
  }
  for (auto& [round, waiters] : parked) answer(*round, std::move(waiters));
  if (worker_.joinable()) worker_.join();
  if (housekeeper_.joinable()) housekeeper_.join();
  idle_cv_.notify_all();
}

double Service::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::size_t Service::job_count() const {
  std::shared_lock lock(jobs_mutex_);
  return jobs_.size();
}

// ---- routing ----

std::string_view Service::route_label(const ApiRequest& request) {
  // Metrics::kRoutes: the first seven are paths as they are, then four with a job id.
  for (std::size_t i = 0; i < 7; ++i) {
    if (request.path == Metrics::kRoutes[i]) return Metrics::kRoutes[i];
  }
  constexpr std::array<std::string_view, 4> kPrefixes = {"/register_rank/", "/schedule/", "/result/", "/profile/"};
  for (std::size_t i = 0; i < kPrefixes.size(); ++i) {
    const std::string_view p = kPrefixes[i];
    if (request.path.size() > p.size() && request.path.compare(0, p.size(), p) == 0) return Metrics::kRoutes[7 + i];
  }
  return Metrics::kRoutes.back();
}

void Service::handle_async(const ApiRequest& request, Responder respond) {
  const auto start = Clock::now();
  const std::string_view route = route_label(request);
  if (options_.on_request) options_.on_request(request);
  // Metrics and the log line are written when the answer goes out (for a parked request,
  // when its round is released), then the answer is handed to the caller.
  auto finish = [this, start, route, method = request.method.substr(0, 16), path = request.path.substr(0, 200),
                 respond = std::move(respond)](ApiResponse response) {
    const double elapsed = seconds_since(start);
    metrics_.record_request(route, response.status, elapsed);
    const auto level = response.status >= 500 ? spdlog::level::err
                       : response.status >= 400 ? spdlog::level::info
                                                 : spdlog::level::debug;
    if (log_->should_log(level)) {
      log_->log(level, "event=request method={} route={} path={} status={} ms={:.3f}{}", logfmt_value(method), route,
                logfmt_value(path), response.status, elapsed * 1000.0,
                response.status >= 400 ? " detail=" + logfmt_value(response.body.substr(0, 300)) : "");
    }
    respond(std::move(response));
  };
  Responder park = std::move(finish);
  std::optional<ApiResponse> response;
  try {
    response = dispatch(request, route, &park);
  } catch (const ApiError& e) {
    response = error_response(e.status(), e.what());
  } catch (const InputError& e) {
    response = error_response(422, e.what());
  } catch (const SolveError& e) {
    response = error_response(422, e.what());
  } catch (const std::exception& e) {
    log_->error("event=internal_error route={} error={}", route, logfmt_value(e.what()));
    response = error_response(500, std::string("internal error: ") + e.what());
  }
  if (response) park(std::move(*response));  // else parked: `park` answers later
}

ApiResponse Service::handle(const ApiRequest& request) {
  std::promise<ApiResponse> answered;
  std::future<ApiResponse> answer = answered.get_future();
  handle_async(request, [&answered](ApiResponse response) { answered.set_value(std::move(response)); });
  return answer.get();
}

void Service::record_rejected(const ApiRequest& request, int status) {
  metrics_.record_request(route_label(request), status, 0.0);
  log_->info("event=request method={} route={} status={} detail=\"refused by the HTTP layer\"",
             logfmt_value(request.method.substr(0, 16)), route_label(request), status);
}

bool Service::runs_on_loop(const ApiRequest& request) const {
  if (request.method == "GET") return request.path == "/healthz" || request.path.rfind("/schedule/", 0) == 0;
  return request.method == "POST" && request.path.rfind("/result/", 0) == 0;
}

std::optional<ApiResponse> Service::dispatch(const ApiRequest& request, std::string_view route, Responder* park) {
  auto require = [&](const char* method) {
    if (request.method != method) {
      throw ApiError(405, fmt::format("method {} not allowed on {}; use {}", request.method.substr(0, 16), route, method));
    }
  };
  // All that follows the route's prefix: a job id may hold '/' (its job_metadata is any
  // string, as zeus takes it), which clients send percent-encoded.
  const auto job_id = [&](std::string_view prefix) { return request.path.substr(prefix.size()); };
  if (route == "/") {
    require("GET");
    authorize_listing(request);
    return ApiResponse{200, "text/html; charset=utf-8", web_page_html(jobs_json())};
  }
  if (route == "/healthz") {
    require("GET");
    return json_response(200, {{"status", "ok"}, {"jobs", job_count()}});
  }
  if (route == "/info") {
    require("GET");
    authorize_listing(request);
    return info();
  }
  if (route == "/metrics") {
    require("GET");
    return metrics_page();
  }
  if (route == "/api/jobs") {
    require("GET");
    authorize_listing(request);
    return json_response(200, jobs_json());
  }
  if (route == "/register_job") {
    require("POST");
    return register_job(request);
  }
  if (route == "/straggler") {
    require("POST");
    return straggler(request);
  }
  if (route == "/register_rank/{job_id}") {
    require("POST");
    return register_rank(request, job_id("/register_rank/"));
  }
  if (route == "/schedule/{job_id}") {
    require("GET");
    return schedule(request, job_id("/schedule/"), park);
  }
  if (route == "/result/{job_id}") {
    require("POST");
    return result(request, job_id("/result/"));
  }
  if (route == "/profile/{job_id}") {
    require("POST");
    return profile(request, job_id("/profile/"));
  }
  throw ApiError(404, fmt::format("no route {} {}", request.method.substr(0, 16), request.path.substr(0, 200)));
}

void Service::authorize(const ApiRequest& request, bool straggler_route) const {
  if (options_.token.empty()) return;
  if (!straggler_route && options_.token_scope == TokenScope::kStragglerOnly) return;
  require_bearer_token(request, options_.token);
}

// With --token-scope straggler the protocol's routes are open, so a job id is all it takes to
// act for a job's ranks: the routes that list ids then need the token. With the default
// scope every state change needs the token, and an id alone grants nothing: lists stay open
// (the web page reads them).
void Service::authorize_listing(const ApiRequest& request) const {
  if (options_.token_scope == TokenScope::kStragglerOnly) authorize(request, true);
}

Service::JobPtr Service::find_job(const std::string& job_id) const {
  std::shared_lock lock(jobs_mutex_);
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) throw ApiError(404, fmt::format("unknown job id '{}'", job_id.substr(0, 300)));
  return it->second;
}

// ---- the existing protocol ----

ApiResponse Service::register_job(const ApiRequest& request) {
  authorize(request, false);
  JobInfo info = parse_job_info(parse_json_object(request.body, "JobInfo"));
  const SchedulerConfig& config = options_.scheduler;
  const std::optional<PipelineLayout> layout = info.layout ? info.layout : config.layout;

  auto job = std::make_shared<Job>();
  job->lifecycle = JobLifecycle(layout);  // Frontier: waiting for a profile
  if (config.serves_point_plan()) {
    // A plan that does not fit the job is refused now; zeus's server fails its ranks' first
    // schedule request instead.
    job->lifecycle.serve_point(config.point_plan, point_plan_lists(config, info.pp_degree, info.world_size));
  } else if (config.name == "InVivoProfiling") {
    if (!layout) {
      throw ApiError(422, "JobInfo: InVivoProfiling needs the pipeline schedule: send \"microbatches\" (and "
                          "\"schedule\", \"chunks\") in JobInfo or set them in ZEUS_PFO_SCHEDULER_ARGS");
    }
    job->lifecycle.start_profiling(config.profiling);
  }
  if (layout) stage_instruction_names(*layout, info.pp_degree);  // a layout the schedule rejects fails now
  job->scheduler_name = config.name;
  job->arrived.assign(static_cast<std::size_t>(info.world_size), 0);

  const double t = now();
  {
    std::unique_lock lock(jobs_mutex_);
    auto when = static_cast<std::time_t>(std::floor(t));
    info.job_id = make_job_id(info, config.name, when);
    // Two registrations in the same second: the later takes the next free second.
    while (jobs_.count(info.job_id)) info.job_id = make_job_id(info, config.name, ++when);
    job->info = info;
    job->created_at = t;
    job->last_active = t;
    job->persisted_active = t;
    StoredJob stored{info.job_id, to_json(info), config.name, t, t, state_json(*job), {}, {}, {}, {}};
    store_.insert_job(stored);
    jobs_.emplace(info.job_id, job);
  }
  log_->info("event=register_job job_id={} world_size={} scheduler={}", logfmt_value(info.job_id), info.world_size,
             logfmt_value(config.name));
  return json_response(200, info.job_id);
}

// job.mutex held.
void Service::check_new_rank(const Job& job, const RankInfo& info) const {
  const JobInfo& j = job.info;
  auto check = [&](const char* field, int value, int limit, const char* degree) {
    if (value >= limit) {
      throw ApiError(422, fmt::format("RankInfo.{}: {} is out of range for job {} ({} = {})", field, value, j.job_id,
                                      degree, limit));
    }
  };
  check("rank", info.rank, j.world_size, "world_size");
  check("dp_rank", info.dp_rank, j.dp_degree, "dp_degree");
  check("pp_rank", info.pp_rank, j.pp_degree, "pp_degree");
  check("tp_rank", info.tp_rank, j.tp_degree, "tp_degree");
  if (job.ranks.count(info.rank)) {
    throw ApiError(409, fmt::format("RankInfo.rank: rank {} of job {} is already registered", info.rank, j.job_id));
  }
  for (const auto& [rank, other] : job.ranks) {
    if (other.dp_rank == info.dp_rank && other.pp_rank == info.pp_rank && other.tp_rank == info.tp_rank) {
      throw ApiError(409, fmt::format("RankInfo: rank {} already holds (dp_rank {}, pp_rank {}, tp_rank {})", rank,
                                      info.dp_rank, info.pp_rank, info.tp_rank));
    }
  }
}

ApiResponse Service::register_rank(const ApiRequest& request, const std::string& job_id) {
  authorize(request, false);
  const JobPtr job = find_job(job_id);
  const RankInfo info = parse_rank_info(parse_json_object(request.body, "RankInfo"));
  std::optional<std::map<int, RankInfo>> all_ranks;
  {
    std::lock_guard lock(job->mutex);
    check_new_rank(*job, info);
    store_.insert_rank(job_id, info.rank, to_json(info));
    job->ranks.emplace(info.rank, info);
    job->last_active = now();
    if (options_.dump_data && static_cast<int>(job->ranks.size()) == job->info.world_size) all_ranks = job->ranks;
  }
  log_->debug("event=register_rank job_id={} rank={} pp_rank={} dp_rank={}", logfmt_value(job_id), info.rank,
              info.pp_rank, info.dp_rank);
  if (all_ranks) write_dump_file(*job, "ranks.json", [&] { return ranks_file(*all_ranks); });
  return json_response(200, nullptr);
}

Service::Release Service::release_round(Job& job) {
  std::optional<ApiError> release_error;
  try {
    const JobView view{job.info, job.ranks};
    const std::string previous = job.deployment ? job.deployment->label : "";
    Deployment deployment = job.lifecycle.scheduler().next_round(view, now());
    deployment.prepare();
    job.deployment = std::make_shared<const Deployment>(std::move(deployment));
    if (job.deployment->label != previous) {
      log_->info("event=deploy job_id={} round={} plan={}", logfmt_value(job.info.job_id), job.generation,
                 logfmt_value(job.deployment->label));
      if (options_.dump_data) {
        json record = {{"round", job.generation}, {"at", now()}, {"label", job.deployment->label},
                       {"plan", plan_json(*job.deployment->normal)}};
        if (job.deployment->straggling) {
          record["straggler_pipelines"] = job.deployment->straggler_pipelines;
          record["straggler_plan"] = plan_json(*job.deployment->straggling);
        }
        append_dump_line(job, "deployments.jsonl", record.dump());
      }
    }
    if (options_.dump_data) job.dump_round = DumpRound{job.generation, job.deployment, {}, {}};
  } catch (const ApiError& e) {
    release_error = e;
  } catch (const std::exception& e) {
    release_error = ApiError(500, std::string("internal error: ") + e.what());
  }
  if (release_error) job.dump_round.reset();
  metrics_.record_barrier_release(seconds_since(job.round_started));
  std::fill(job.arrived.begin(), job.arrived.end(), 0);
  job.arrived_count = 0;
  ++job.generation;
  // Persisted before any rank hears of the round: a rank whose answer is lost (the server
  // killed mid-write, a dropped connection) asks again for it, also of a restarted server.
  try {
    store_.save_round(job.info.job_id, job.generation);
  } catch (const std::exception& e) {
    log_->error("event=persist_failed job_id={} what=round error={}", logfmt_value(job.info.job_id),
                logfmt_value(e.what()));
  }
  std::shared_ptr<Round> done = std::exchange(job.round, std::make_shared<Round>());
  std::vector<Waiter> waiters = done->finish(release_error ? nullptr : job.deployment, std::move(release_error));
  return {std::move(done), std::move(waiters)};
}

void Service::answer(const Round& round, std::vector<Waiter> waiters) {
  for (Waiter& waiter : waiters) {
    waiter.respond(round.error ? error_response(round.error->status(), round.error->what())
                               : ApiResponse{200, "application/json", round.deployment->schedule_body(waiter.info)});
  }
}

std::optional<ApiResponse> Service::schedule(const ApiRequest& request, const std::string& job_id, Responder* park) {
  // A GET, yet it moves the barrier and the persisted round count: a state change.
  authorize(request, false);
  const JobPtr job = find_job(job_id);
  const int rank = query_int(request, "rank", 0, job->info.world_size - 1);
  std::optional<std::uint64_t> requested_round;
  if (query_value(request, "round")) requested_round = query_int(request, "round", 0, 2147483647);
  std::unique_lock lock(job->mutex);
  if (job->removed) throw ApiError(404, fmt::format("job {} expired or was removed", job_id));
  const auto me = job->ranks.find(rank);
  if (me == job->ranks.end()) {
    throw ApiError(409, fmt::format("rank {} has not registered with job {} (POST /register_rank/{{job_id}} first)",
                                    rank, job_id));
  }
  job->last_active = now();
  // The perseus client says which round it wants (an extension; clients that do not are
  // simply counted in the current one). It may ask again for the round just released if it
  // never got the answer.
  if (requested_round) {
    const std::uint64_t current = job->generation;
    if (*requested_round + 1 == current) {
      if (!job->deployment) {  // released before a restart: the scheduler's plan for it
        Deployment deployment = job->lifecycle.scheduler().next_round(JobView{job->info, job->ranks}, now());
        deployment.prepare();
        job->deployment = std::make_shared<const Deployment>(std::move(deployment));
      }
      const std::shared_ptr<const Deployment> deployment = job->deployment;
      const RankInfo info = me->second;
      lock.unlock();
      return ApiResponse{200, "application/json", deployment->schedule_body(info)};
    }
    // Ahead of the server (its round count was lost): count from the clients'. Further behind
    // (a rank process that restarted and counts from 0 again): it joins the current round.
    if (*requested_round > current && job->arrived_count == 0) job->generation = *requested_round;
  }
  if (shutting_down_) throw ApiError(503, "the server is shutting down");
  if (!job->arrived[static_cast<std::size_t>(rank)]) {
    job->arrived[static_cast<std::size_t>(rank)] = 1;
    if (job->arrived_count++ == 0) job->round_started = Clock::now();
  }
  const RankInfo info = me->second;
  if (job->arrived_count < job->info.world_size) {
    // Parked until the round is released; a rank that asks twice in one round (its first
    // connection lost) is answered on both.
    Waiter waiter{rank, info, std::move(*park), std::nullopt};
    if (options_.barrier_timeout_s > 0) {
      waiter.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.barrier_timeout_s));
      watch_barrier_deadline(*waiter.deadline, job);
    }
    job->round->waiters.push_back(std::move(waiter));
    return std::nullopt;
  }
  auto [round, waiters] = release_round(*job);
  lock.unlock();
  // Every other rank of the round is answered from here, without the job's lock.
  answer(*round, std::move(waiters));
  if (round->error) throw *round->error;
  return ApiResponse{200, "application/json", round->deployment->schedule_body(info)};
}

void Service::watch_barrier_deadline(Clock::time_point deadline, const JobPtr& job) {
  std::lock_guard lock(work_mutex_);
  const bool earliest = barrier_deadlines_.empty() || deadline < barrier_deadlines_.begin()->first;
  barrier_deadlines_.emplace(deadline, job);
  if (earliest) housekeeping_cv_.notify_all();
}

void Service::expire_barrier_waits() {
  std::vector<std::weak_ptr<Job>> due;
  {
    std::lock_guard lock(work_mutex_);
    const auto now = Clock::now();
    while (!barrier_deadlines_.empty() && barrier_deadlines_.begin()->first <= now) {
      due.push_back(barrier_deadlines_.begin()->second);
      barrier_deadlines_.erase(barrier_deadlines_.begin());
    }
  }
  for (const std::weak_ptr<Job>& weak : due) {
    const JobPtr job = weak.lock();
    if (!job) continue;
    std::vector<std::pair<Waiter, ApiError>> expired;
    {
      std::lock_guard lock(job->mutex);
      auto& waiters = job->round->waiters;
      const auto now = Clock::now();
      const auto past = [&](const Waiter& w) { return w.deadline && *w.deadline <= now; };
      if (std::none_of(waiters.begin(), waiters.end(), past)) continue;
      const ApiError error = barrier_timeout_error(*job);  // names the ranks that never came
      // A rank that gave up is no longer counted: the round waits for it to ask again rather
      // than being released without it.
      for (const Waiter& w : waiters) {
        if (!past(w) || !job->arrived[static_cast<std::size_t>(w.rank)]) continue;
        job->arrived[static_cast<std::size_t>(w.rank)] = 0;
        --job->arrived_count;
      }
      for (auto it = waiters.begin(); it != waiters.end();) {
        if (!past(*it)) {
          ++it;
          continue;
        }
        expired.emplace_back(std::move(*it), error);
        it = waiters.erase(it);
      }
    }
    for (auto& [waiter, error] : expired) waiter.respond(error_response(error.status(), error.what()));
  }
}

// job.mutex held.
ApiError Service::barrier_timeout_error(const Job& job) const {
  std::string missing;
  int listed = 0;
  for (int r = 0; r < job.info.world_size && listed < 16; ++r) {
    if (!job.arrived[static_cast<std::size_t>(r)]) missing += (listed++ ? ", " : "") + std::to_string(r);
  }
  const int waiting_for = job.info.world_size - job.arrived_count;
  return ApiError(408, fmt::format("schedule barrier of job {} timed out after {} s: {} rank(s) have not asked for "
                                   "this round ({}{}); ask again to rejoin it",
                                   job.info.job_id, options_.barrier_timeout_s, waiting_for, missing,
                                   waiting_for > listed ? ", ..." : ""));
}

ApiResponse Service::result(const ApiRequest& request, const std::string& job_id) {
  authorize(request, false);
  const JobPtr job = find_job(job_id);
  const ProfilingResult result = parse_profiling_result(parse_json_object(request.body, "ProfilingResult"));
  std::optional<nlohmann::ordered_json> dumped;  // read before taking the job's lock
  if (options_.dump_data) dumped = zeus_profiling_result(request.body);
  std::optional<DumpRound> complete;
  ApiResponse response = apply_result(job, result, std::move(dumped), complete);
  if (complete) {
    // As zeus: N.prof.json, then N.sched.json. Written without the job's lock: with a
    // thousand ranks they are megabytes.
    write_dump_file(*job, fmt::format("{}.prof.json", complete->round),
                    [&] { return profiling_results_file(complete->results); });
    write_dump_file(*job, fmt::format("{}.sched.json", complete->round),
                    [&] { return schedules_file(*complete->deployment, complete->ranks); });
  }
  return response;
}

// job.mutex held. A rank's first result after the latest round counts toward that round's
// files; the round, once every rank has reported, is handed back to be written.
std::optional<DumpRound> Service::add_to_dump_round(Job& job, int rank, nlohmann::ordered_json result) {
  if (!job.dump_round) return std::nullopt;
  job.dump_round->results.emplace(rank, std::move(result));
  if (static_cast<int>(job.dump_round->results.size()) < job.info.world_size) return std::nullopt;
  DumpRound complete = std::move(*job.dump_round);
  job.dump_round.reset();
  complete.ranks = job.ranks;
  return complete;
}

ApiResponse Service::apply_result(const JobPtr& job, const ProfilingResult& result,
                                  std::optional<nlohmann::ordered_json> dumped, std::optional<DumpRound>& complete) {
  const std::string& job_id = job->info.job_id;
  std::lock_guard lock(job->mutex);
  if (result.rank >= job->info.world_size) {
    throw ApiError(422, fmt::format("ProfilingResult.rank: {} is out of range for job {} (world_size = {})",
                                    result.rank, job_id, job->info.world_size));
  }
  if (!job->ranks.count(result.rank)) {
    throw ApiError(409, fmt::format("rank {} has not registered with job {}", result.rank, job_id));
  }
  job->last_active = now();
  if (dumped) complete = add_to_dump_round(*job, result.rank, std::move(*dumped));
  const bool changed = job->lifecycle.scheduler().on_result(JobView{job->info, job->ranks}, result);
  const InVivoProfilingScheduler* profiling = job->lifecycle.profiling();
  if (profiling && profiling->done()) {
    const std::string source = fmt::format("in-vivo profile of job {}", job_id);
    const PipelineLayout layout = *job->lifecycle.layout();  // profiling needs one
    std::optional<FrontierInputs> inputs;
    try {
      const Profile measured = profiling->profile(source);
      inputs = FrontierInputs{profile_to_csv(measured), source, layout, job->info.pp_degree,
                              options_.scheduler.p_blocking.value_or(0.0), options_.scheduler.unit_time};
    } catch (const std::exception& e) {
      // What the ranks measured makes no profile: the job fails once, not at every result.
      job->lifecycle.fail(std::string("in-vivo profile unusable: ") + e.what(), "profiling");
      persist_state(*job);
      log_->error("event=profiling_failed job_id={} error={}", logfmt_value(job_id), logfmt_value(e.what()));
      return json_response(200, nullptr);
    }
    log_->info("event=profiling_done job_id={} frequencies={} reason={}", logfmt_value(job_id),
               profiling->frequencies_done(), logfmt_value(profiling->stop_reason()));
    job->lifecycle.start_computing(layout, {});
    store_.save_profile(job_id, inputs->profile_csv, inputs_to_json(*inputs), state_json(*job));
    start_computation(job, std::move(*inputs), std::nullopt);
  } else if (changed) {
    persist_state(*job);
  }
  return json_response(200, nullptr);
}

// ---- beyond the existing server ----

ApiResponse Service::profile(const ApiRequest& request, const std::string& job_id) {
  authorize(request, false);
  const JobPtr job = find_job(job_id);
  if (job->scheduler_name == "PointSolution" || job->scheduler_name == "PointSolution3D") {
    throw ApiError(409, fmt::format("job {} is served by {}, a fixed plan; it takes no profile", job_id,
                                    job->scheduler_name));
  }
  const auto p_blocking = query_positive(request, "p_blocking");
  if (!p_blocking && !options_.scheduler.p_blocking) {
    throw ApiError(422, "query parameter 'p_blocking': required (W while blocked; A100 83.64, A40 70.38)");
  }
  const double unit_time = query_positive(request, "unit_time").value_or(options_.scheduler.unit_time);
  std::optional<PipelineLayout> layout;
  {
    std::lock_guard lock(job->mutex);
    layout = job->lifecycle.layout();
  }
  if (query_value(request, "microbatches")) {
    PipelineLayout given;
    given.microbatches = query_int(request, "microbatches", 1, 1 << 16);
    given.chunks = query_value(request, "chunks") ? query_int(request, "chunks", 1, 64) : 1;
    if (const auto kind = query_value(request, "schedule")) {
      try {
        given.kind = parse_schedule_kind(*kind);
      } catch (const InputError& e) {
        throw ApiError(422, std::string("query parameter 'schedule': ") + e.what());
      }
    }
    layout = given;
  } else if (query_value(request, "schedule") || query_value(request, "chunks")) {
    throw ApiError(422, "query parameters 'schedule' and 'chunks' need 'microbatches'");
  }
  if (!layout) {
    throw ApiError(422, "query parameter 'microbatches': required, the server does not know this job's schedule");
  }
  FrontierInputs inputs{request.body, fmt::format("profile of job {}", job_id), *layout, job->info.pp_degree,
                        p_blocking.value_or(options_.scheduler.p_blocking.value_or(0.0)), unit_time};
  std::vector<Warning> warnings;
  EnergyProblem problem = make_server_problem(inputs, &warnings);  // InputError/SolveError: 422

  std::lock_guard lock(job->mutex);
  if (job->removed) throw ApiError(404, fmt::format("job {} expired or was removed", job_id));
  std::vector<std::string> messages;
  for (const Warning& w : warnings) messages.push_back(w.message);
  job->lifecycle.start_computing(inputs.layout, std::move(messages));
  job->last_active = now();
  store_.save_profile(job_id, inputs.profile_csv, inputs_to_json(inputs), state_json(*job));
  const json answer = {{"status", "computing"},
                       {"stages", problem.num_gpus()},
                       {"instructions", problem.dag.num_nodes()},
                       {"operations", problem.operations.size()},
                       {"warnings", job->lifecycle.warnings()}};
  log_->info("event=profile_uploaded job_id={} bytes={} instructions={}", logfmt_value(job_id), request.body.size(),
             problem.dag.num_nodes());
  start_computation(job, std::move(inputs), std::move(problem));
  return json_response(202, answer);
}

ApiResponse Service::straggler(const ApiRequest& request) {
  const auto start = Clock::now();
  authorize(request, true);
  const StragglerNotice notice = parse_straggler_notice(parse_json_object(request.body, "Straggler"));
  JobPtr job;
  if (notice.job_id) {
    job = find_job(*notice.job_id);
  } else {
    std::shared_lock lock(jobs_mutex_);
    if (jobs_.size() != 1) {
      throw ApiError(422, fmt::format("Straggler.job_id: required when the server has {} jobs", jobs_.size()));
    }
    job = jobs_.begin()->second;
  }
  std::lock_guard lock(job->mutex);
  FrontierScheduler* frontier = job->lifecycle.frontier();
  if (!frontier) {
    throw ApiError(409, fmt::format("job {} has no frontier yet (phase '{}'); straggler plans come from one",
                                    job->info.job_id, to_string(job->lifecycle.phase())));
  }
  const auto rank = job->ranks.find(notice.id);
  if (rank == job->ranks.end()) {
    throw ApiError(422, fmt::format("Straggler.id: rank {} is not registered with job {}", notice.id, job->info.job_id));
  }
  const double t = now();
  const StragglerState state{notice.id, rank->second.dp_rank, notice.degree, t + notice.delay_s, t};
  const StragglerDecision decision = frontier->announce(state);
  const double replan_seconds = seconds_since(start);  // notice in, plan ready: what the paper calls instantaneous
  metrics_.record_straggler_replan(replan_seconds);
  persist_state(*job);
  log_->info("event=straggler job_id={} id={} pipeline={} degree={} delay_s={} t_prime_s={:.6f} t_opt_s={:.6f} "
             "frontier_index={} replan_us={:.1f}",
             logfmt_value(job->info.job_id), notice.id, state.pipeline, notice.degree, notice.delay_s,
             decision.t_prime_s, decision.t_opt_s, decision.frontier_index, replan_seconds * 1e6);
  const auto& table = *frontier->table();
  return json_response(200, {{"job_id", job->info.job_id},
                             {"id", notice.id},
                             {"pipeline", state.pipeline},
                             {"degree", notice.degree},
                             {"effective_at", state.effective_at},
                             {"effective_in_s", notice.delay_s},
                             {"t_min_s", decision.t_min_s},
                             {"t_star_s", table.time(table.t_star_index())},
                             {"t_prime_s", decision.t_prime_s},
                             {"t_opt_s", decision.t_opt_s},
                             {"frontier_index", decision.frontier_index},
                             {"plan_time_s", decision.plan_time_s},
                             {"plan_energy_j", decision.plan_energy_j},
                             {"replan_seconds", replan_seconds}});
}

ApiResponse Service::info() const {
  json jobs = json::array();
  std::size_t ranks = 0;
  {
    std::shared_lock lock(jobs_mutex_);
    for (const auto& [id, job] : jobs_) {
      std::lock_guard job_lock(job->mutex);
      ranks += job->ranks.size();
      jobs.push_back({{"job_id", id}, {"phase", to_string(job->lifecycle.phase())}, {"ranks", job->ranks.size()},
                      {"world_size", job->info.world_size}});
    }
  }
  json auth = json::array();
  if (!options_.token.empty()) {
    auth = options_.token_scope == TokenScope::kAllChanges
               ? json::array({"/register_job", "/register_rank", "/schedule", "/result", "/profile", "/straggler"})
               : json::array({"/straggler", "/", "/api/jobs", "/info"});
  }
  json layout = options_.scheduler.layout ? to_json(*options_.scheduler.layout) : json(nullptr);
  return json_response(200, {{"server", "perseus"},
                             {"version", "0.1.0"},
                             {"scheduler", options_.scheduler.name},
                             {"default_layout", layout},
                             {"uptime_s", seconds_since(started_)},
                             {"database", options_.db_path},
                             {"token_required_for", auth},
                             {"max_job_idle_time_s", options_.max_job_idle_s},
                             {"barrier_timeout_s", options_.barrier_timeout_s},
                             {"dump_data", options_.dump_data},
                             {"ranks", ranks},
                             {"jobs", std::move(jobs)}});
}

ApiResponse Service::metrics_page() const {
  std::size_t jobs = 0, ranks = 0, waiting = 0, frontiers = 0;
  {
    std::shared_lock lock(jobs_mutex_);
    jobs = jobs_.size();
    for (const auto& [id, job] : jobs_) {
      std::lock_guard job_lock(job->mutex);
      ranks += job->ranks.size();
      waiting += static_cast<std::size_t>(job->arrived_count);
      frontiers += job->lifecycle.phase() == JobPhase::kFrontier;
    }
  }
  std::size_t queued = 0;
  {
    std::lock_guard lock(work_mutex_);
    queued = queue_.size() + (computing_ ? 1 : 0);
  }
  const std::string body = metrics_.render({
      {"perseus_jobs", {"Registered jobs.", static_cast<double>(jobs)}},
      {"perseus_ranks", {"Registered ranks over all jobs.", static_cast<double>(ranks)}},
      {"perseus_ranks_waiting_at_barrier", {"Ranks waiting for their round's schedule.", static_cast<double>(waiting)}},
      {"perseus_jobs_with_frontier", {"Jobs serving plans from a frontier.", static_cast<double>(frontiers)}},
      {"perseus_frontier_computations_pending", {"Frontier computations queued or running.", static_cast<double>(queued)}},
      {"perseus_uptime_seconds", {"Seconds since the server started.", seconds_since(started_)}},
  });
  return ApiResponse{200, "text/plain; version=0.0.4; charset=utf-8", body};
}

nlohmann::json Service::jobs_json() const {
  std::vector<JobPtr> jobs;
  {
    std::shared_lock lock(jobs_mutex_);
    for (const auto& [id, job] : jobs_) jobs.push_back(job);
  }
  json list = json::array();
  for (const JobPtr& job : jobs) {
    std::lock_guard lock(job->mutex);
    list.push_back(job_json(*job));
  }
  return {{"now", now()}, {"jobs", std::move(list)}};
}

nlohmann::json Service::job_json(Job& job) const {
  json out = to_json(job.info);
  out["scheduler"] = job.scheduler_name;
  const JobLifecycle& lifecycle = job.lifecycle;
  out["phase"] = to_string(lifecycle.phase());
  out["error"] = lifecycle.error();
  out["warnings"] = lifecycle.warnings();
  out["ranks_registered"] = job.ranks.size();
  out["created_at"] = job.created_at;
  out["last_active"] = job.last_active.load();
  out["rounds"] = job.generation;
  out["waiting_at_barrier"] = job.arrived_count;
  out["layout"] = lifecycle.layout() ? to_json(*lifecycle.layout()) : json(nullptr);
  out["deployment"] = job.deployment ? json(job.deployment->label) : json(nullptr);
  if (const InVivoProfilingScheduler* profiling = lifecycle.profiling()) {
    out["profiling"] = {{"current_frequency", profiling->current_frequency() ? json(*profiling->current_frequency()) : json(nullptr)},
                        {"done", profiling->frequencies_done()},
                        {"total", profiling->frequencies_total()}};
  }
  if (!lifecycle.profiling_stop_reason().empty()) out["profiling_stop_reason"] = lifecycle.profiling_stop_reason();
  const FrontierScheduler* frontier = lifecycle.frontier();
  if (!frontier) return out;
  const FrontierTable& table = *frontier->table();
  const double t = now();
  const StragglerDecision decision = frontier->decide(t);
  // At most ~256 points reach the page; the current one always does.
  json points = json::array();
  const std::size_t step = std::max<std::size_t>(1, table.size() / 256);
  for (std::size_t i = 0; i < table.size(); i += step) points.push_back(json::array({table.time(i), table.energy(i)}));
  if ((table.size() - 1) % step) points.push_back(json::array({table.time(table.size() - 1), table.energy(table.size() - 1)}));
  const std::size_t current = decision.frontier_index;
  out["frontier"] = {{"size", table.size()},
                     {"points", std::move(points)},
                     {"t_min_s", table.time(0)},
                     {"t_star_s", table.time(table.t_star_index())},
                     {"current_index", current},
                     {"current", json::array({table.time(current), table.energy(current)})},
                     {"computation_s", lifecycle.frontier_seconds()}};
  out["t_prime_s"] = decision.t_prime_s;
  out["t_opt_s"] = decision.t_opt_s;
  const auto plan = table.plan(current);
  json stages = json::array();
  for (const auto& stage : plan->timeline) {
    json entries = json::array();
    for (const TimelineEntry& e : stage) {
      entries.push_back(json::array({std::string(to_string(e.kind)).substr(0, 1), e.microbatch, e.start_s, e.end_s,
                                     e.frequency_mhz}));
    }
    stages.push_back(std::move(entries));
  }
  out["plan"] = {{"time_s", plan->measured.time_s}, {"energy_j", plan->measured.energy_j}, {"stages", std::move(stages)}};
  json stragglers = json::array();
  for (const StragglerState& s : frontier->stragglers()) {
    stragglers.push_back({{"id", s.id},
                          {"pipeline", s.pipeline},
                          {"degree", s.degree},
                          {"effective_at", s.effective_at},
                          {"in_force", s.effective_at <= t}});
  }
  out["stragglers"] = std::move(stragglers);
  return out;
}

// ---- persistence and recovery ----

nlohmann::json Service::state_json(const Job& job) const {
  json state = job.lifecycle.state_json();
  state["round"] = job.generation;
  return state;
}

void Service::persist_state(Job& job) {
  try {
    store_.save_state(job.info.job_id, state_json(job));
  } catch (const std::exception& e) {
    log_->error("event=persist_failed job_id={} error={}", logfmt_value(job.info.job_id), logfmt_value(e.what()));
  }
}

void Service::recover() {
  for (StoredJob& stored : store_.load_all()) {
    auto job = std::make_shared<Job>();
    try {
      if (stored.info.is_discarded() || stored.state.is_discarded()) throw InputError("unreadable JSON in the job row");
      job->info = job_info_from_store(stored.info);
      job->scheduler_name = stored.scheduler;
      job->created_at = stored.created_at;
      job->last_active = stored.last_active;
      job->persisted_active = stored.last_active;
      job->arrived.assign(static_cast<std::size_t>(job->info.world_size), 0);
      for (const auto& [rank, info] : stored.ranks) job->ranks.emplace(rank, parse_rank_info(info));
      job->generation = stored.state.value("round", std::uint64_t{0});
      std::optional<FrontierInputs> inputs;
      if (stored.profile_csv) inputs = inputs_from_json(stored.profile_params, *stored.profile_csv);
      const auto stored_frontier = [&]() -> std::shared_ptr<const FrontierTable> {
        if (!inputs || !stored.frontier) return nullptr;
        try {
          return FrontierTable::restore(make_server_problem(*inputs, nullptr), *stored.frontier);
        } catch (const std::exception& e) {
          log_->warn("event=recover_frontier_failed job_id={} error={} action=recompute",
                     logfmt_value(job->info.job_id), logfmt_value(e.what()));
          return nullptr;
        }
      };
      job->lifecycle.restore(stored.state, options_.scheduler.profiling, inputs.has_value(), stored_frontier);
      if (job->lifecycle.phase() == JobPhase::kComputing) {
        if (job->lifecycle.compute_attempts() >= kMaxComputeAttempts) {
          // Started that often and never finished: the computation took the server down.
          job->lifecycle.fail(fmt::format("frontier computation did not finish in {} attempts (crashed?)",
                                          job->lifecycle.compute_attempts()),
                              "frontier");
          persist_state(*job);
          log_->error("event=frontier_failed job_id={} error={}", logfmt_value(job->info.job_id),
                      logfmt_value(job->lifecycle.error()));
        } else {
          queue_.push_back(std::make_unique<ComputeTask>(
              ComputeTask{job, job->lifecycle.profile_version(), *inputs, std::nullopt}));
        }
      }
    } catch (const std::exception& e) {
      // Keep the job (its ranks may still be running) at the highest clock and say why.
      log_->error("event=recover_failed job_id={} error={}", logfmt_value(stored.job_id), logfmt_value(e.what()));
      if (job->info.job_id.empty()) continue;
      job->lifecycle.fail(std::string("recovery failed: ") + e.what(), "recovery");
    }
    log_->info("event=recover job_id={} phase={} ranks={}", logfmt_value(job->info.job_id),
               to_string(job->lifecycle.phase()), job->ranks.size());
    jobs_.emplace(job->info.job_id, std::move(job));
  }
}

// ---- frontier computation ----

void Service::start_computation(const JobPtr& job, FrontierInputs inputs, std::optional<EnergyProblem> problem) {
  {
    std::lock_guard lock(work_mutex_);
    if (stopping_) return;
    queue_.push_back(std::make_unique<ComputeTask>(
        ComputeTask{job, job->lifecycle.profile_version(), std::move(inputs), std::move(problem)}));
  }
  work_cv_.notify_one();
}

void Service::worker_loop() {
  while (true) {
    std::unique_ptr<ComputeTask> task;
    {
      std::unique_lock lock(work_mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      task = std::move(queue_.front());
      queue_.pop_front();
      computing_ = true;
    }
    Job& job = *task->job;
    const std::string id = job.info.job_id;
    const auto stale = [&] {
      if (shutting_down_ || job.removed) return true;
      std::lock_guard lock(job.mutex);
      return job.lifecycle.profile_version() != task->version;
    };
    const auto start = Clock::now();
    std::shared_ptr<FrontierTable> table;
    std::string error;
    int attempt = 0;
    try {
      if (!stale()) {
        {
          // Counted and persisted before the computation starts, so that a restart knows
          // how often it was started without finishing.
          std::lock_guard lock(job.mutex);
          if (job.lifecycle.profile_version() == task->version) {
            attempt = job.lifecycle.start_compute_attempt();
            persist_state(job);
          }
        }
        if (attempt > 0) {
          EnergyProblem problem =
              task->problem ? std::move(*task->problem) : make_server_problem(task->inputs, nullptr);
          log_->info("event=frontier_started job_id={} instructions={} attempt={}", logfmt_value(id),
                     problem.dag.num_nodes(), attempt);
          table = FrontierTable::compute(std::move(problem), stale, options_.scheduler.exact_seconds);
        }
      }
    } catch (const ComputationCancelled&) {
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    const double seconds = seconds_since(start);
    {
      std::lock_guard lock(job.mutex);
      if (!job.removed && job.lifecycle.profile_version() == task->version && (table || !error.empty())) {
        metrics_.record_frontier(table != nullptr, seconds);
        if (table) {
          const std::size_t points = table->size();
          const double t_min = table->time(0), t_star = table->time(table->t_star_index());
          job.lifecycle.frontier_ready(std::move(table), seconds);
          try {
            store_.save_frontier(id, job.lifecycle.frontier()->table()->serialize_points(), state_json(job));
          } catch (const std::exception& e) {
            log_->error("event=persist_failed job_id={} error={}", logfmt_value(id), logfmt_value(e.what()));
          }
          log_->info("event=frontier_ready job_id={} points={} t_min_s={:.6f} t_star_s={:.6f} seconds={:.3f}",
                     logfmt_value(id), points, t_min, t_star, seconds);
        } else {
          // Failed for good (persisted): a restart serves the highest clock and does not retry.
          job.lifecycle.frontier_failed(error);
          persist_state(job);
          log_->error("event=frontier_failed job_id={} error={}", logfmt_value(id), logfmt_value(error));
        }
      } else if (attempt > 0 && shutting_down_ && !job.removed && job.lifecycle.profile_version() == task->version) {
        // Cut short by a stop, not a crash: the next start resumes it without counting this one.
        job.lifecycle.forget_compute_attempt();
        persist_state(job);
      }
    }
    {
      std::lock_guard lock(work_mutex_);
      computing_ = false;
    }
    idle_cv_.notify_all();
  }
}

bool Service::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(work_mutex_);
  return idle_cv_.wait_for(lock, timeout, [&] { return stopping_ || (queue_.empty() && !computing_); });
}

// ---- housekeeping ----

std::size_t Service::expire_idle_jobs() {
  const double t = now();
  std::vector<JobPtr> expired;
  {
    std::unique_lock lock(jobs_mutex_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (t - it->second->last_active.load() > options_.max_job_idle_s) {
        expired.push_back(it->second);
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const JobPtr& job : expired) {
    {
      std::unique_lock lock(job->mutex);
      job->removed = true;
      std::vector<Waiter> waiters =
          job->round->finish(nullptr, ApiError(404, fmt::format("job {} expired or was removed", job->info.job_id)));
      const std::shared_ptr<Round> round = job->round;
      lock.unlock();
      answer(*round, std::move(waiters));
    }
    try {
      store_.delete_job(job->info.job_id);
    } catch (const std::exception& e) {
      log_->error("event=persist_failed job_id={} error={}", logfmt_value(job->info.job_id), logfmt_value(e.what()));
    }
    log_->info("event=job_expired job_id={} idle_s={:.0f}", logfmt_value(job->info.job_id),
               t - job->last_active.load());
  }
  return expired.size();
}

void Service::housekeeping_loop() {
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.housekeeping_interval_s));
  auto next_housekeeping = Clock::now() + interval;
  std::unique_lock lock(work_mutex_);
  while (!stopping_) {
    // Also wakes for the earliest barrier deadline (watch_barrier_deadline notifies when it
    // moves earlier).
    auto wake = next_housekeeping;
    if (!barrier_deadlines_.empty()) wake = std::min(wake, barrier_deadlines_.begin()->first);
    housekeeping_cv_.wait_until(lock, wake);
    if (stopping_) break;
    lock.unlock();
    expire_barrier_waits();
    if (Clock::now() < next_housekeeping) {
      lock.lock();
      continue;
    }
    next_housekeeping = Clock::now() + interval;
    expire_idle_jobs();
    // Activity is kept in memory per request and written here, not on every request.
    std::vector<std::pair<std::string, double>> changed;
    {
      std::shared_lock jobs_lock(jobs_mutex_);
      for (const auto& [id, job] : jobs_) {
        const double active = job->last_active.load();
        if (active != job->persisted_active) {
          changed.emplace_back(id, active);
          job->persisted_active = active;
        }
      }
    }
    try {
      store_.save_last_active(changed);
    } catch (const std::exception& e) {
      log_->error("event=persist_failed what=last_active error={}", logfmt_value(e.what()));
    }
    lock.lock();
  }
}

std::filesystem::path Service::dump_folder(const Job& job) const {
  return std::filesystem::path(options_.dump_dir) / dump_folder_name(job.info.job_id);
}

// A failure to dump is logged, never the job's: zeus's server fails every rank of the job.
void Service::write_dump_file(const Job& job, const std::string& file, const std::function<std::string()>& content) {
  try {
    const std::filesystem::path dir = dump_folder(job);
    std::filesystem::create_directories(dir);
    write_file_atomically(dir / file, content());
  } catch (const std::exception& e) {
    log_->warn("event=dump_failed job_id={} file={} error={}", logfmt_value(job.info.job_id), logfmt_value(file),
               logfmt_value(e.what()));
  }
}

void Service::append_dump_line(const Job& job, const std::string& file, const std::string& line) {
  std::lock_guard lock(dump_mutex_);
  try {
    const std::filesystem::path dir = dump_folder(job);
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / file, std::ios::app);
    out << line << '\n';
    if (!out.flush()) throw InputError((dir / file).string() + ": cannot be written");
  } catch (const std::exception& e) {
    log_->warn("event=dump_failed job_id={} file={} error={}", logfmt_value(job.info.job_id), logfmt_value(file),
               logfmt_value(e.what()));
  }
}

}  // namespace perseus::server
