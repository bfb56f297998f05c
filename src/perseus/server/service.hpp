// The server's routes and state, independent of HTTP: `handle` takes a request and answers
// it, so every route can be driven from a unit test without sockets. One Service holds the
// jobs, their barriers and schedulers, the SQLite store, a worker thread that computes
// frontiers, and a housekeeping thread that expires idle jobs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/job_store.hpp"
#include "perseus/server/metrics.hpp"
#include "perseus/server/scheduler_config.hpp"
#include "perseus/server/schedulers.hpp"
#include "perseus/server/zeus_dump.hpp"

namespace spdlog {
class logger;
}

namespace perseus::server {

enum class TokenScope { kAllChanges, kStragglerOnly };

struct ServiceOptions {
  SchedulerConfig scheduler;
  std::string db_path = ":memory:";
  std::string token;  // empty: no authentication
  TokenScope token_scope = TokenScope::kAllChanges;
  double max_job_idle_s = 7 * 24 * 3600.0;
  double barrier_timeout_s = 0.0;  // 0: a parked rank waits as long as it takes (as in zeus)
  double housekeeping_interval_s = 30.0;
  bool dump_data = false;
  std::string dump_dir = "dump";
  std::shared_ptr<spdlog::logger> logger;  // null: no logs
  std::function<double()> clock;           // wall clock, s since the epoch; null: the system's
  // Called at the start of every request, before routing (instrumentation and tests). It may
  // call handle() itself; it must not throw.
  std::function<void(const ApiRequest&)> on_request;
};

class Service : public RequestHandler {
 public:
  // Locks and opens the store and recovers every job in it (recomputing frontiers that were
  // pending). Throws InputError when the database cannot be opened or another server holds it.
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Answers a request by calling `respond` exactly once, from this thread or another: every
  // route answers at once but GET /schedule, which is parked until its round is released
  // (called then from the thread that released it), its wait passes --barrier-timeout (from
  // the housekeeping thread), or the job or the server goes away. Never throws; `respond`
  // must not throw either. Records metrics and logs the request when it is answered.
  void handle_async(const ApiRequest& request, Responder respond) override;
  // handle_async, waiting for the answer (tests and in-process callers).
  ApiResponse handle(const ApiRequest& request);

  void record_rejected(const ApiRequest& request, int status) override;
  // The routes every rank calls every iteration: GET /schedule (the barrier parks instead of
  // waiting), /healthz (a counter) and POST /result (parsed and counted; written to the
  // database only when it changes a profiling job's state, a few times per job).
  bool runs_on_loop(const ApiRequest& request) const override;

  // Wakes every request waiting at a barrier (they get 503) and stops the threads.
  void shutdown();
  // Waits until no frontier computation is queued or running; false on timeout.
  bool wait_until_idle(std::chrono::milliseconds timeout);
  // Removes jobs idle longer than max_job_idle_s; returns how many.
  std::size_t expire_idle_jobs();

  const Metrics& metrics() const { return metrics_; }
  JobStore& store() { return store_; }
  std::size_t job_count() const;
  // The label of every route, as metrics name them ("/schedule/{job_id}", ...).
  // A label of Metrics::kRoutes (static storage).
  static std::string_view route_label(const ApiRequest& request);

 private:
  struct Job;
  struct Waiter;
  struct Round;
  struct ComputeTask;
  using JobPtr = std::shared_ptr<Job>;
  using Release = std::pair<std::shared_ptr<Round>, std::vector<Waiter>>;

  // nullopt: the request was parked (*park taken over) and is answered later.
  std::optional<ApiResponse> dispatch(const ApiRequest& request, std::string_view route, Responder* park);
  void authorize(const ApiRequest& request, bool straggler_route) const;
  void authorize_listing(const ApiRequest& request) const;  // routes that list job ids
  JobPtr find_job(const std::string& job_id) const;
  double now() const;

  ApiResponse register_job(const ApiRequest& request);
  ApiResponse register_rank(const ApiRequest& request, const std::string& job_id);
  std::optional<ApiResponse> schedule(const ApiRequest& request, const std::string& job_id, Responder* park);
  ApiResponse result(const ApiRequest& request, const std::string& job_id);
  ApiResponse apply_result(const JobPtr& job, const ProfilingResult& result,
                           std::optional<nlohmann::ordered_json> dumped, std::optional<DumpRound>& complete);
  std::optional<DumpRound> add_to_dump_round(Job& job, int rank, nlohmann::ordered_json result);
  void check_new_rank(const Job& job, const RankInfo& info) const;  // ApiError when it cannot join
  ApiResponse profile(const ApiRequest& request, const std::string& job_id);
  ApiResponse straggler(const ApiRequest& request);
  ApiResponse info() const;
  ApiResponse metrics_page() const;
  nlohmann::json jobs_json() const;
  nlohmann::json job_json(Job& job) const;  // job.mutex held

  nlohmann::json state_json(const Job& job) const;  // job.mutex held
  void persist_state(Job& job);                    // job.mutex held; logs failures
  void start_computation(const JobPtr& job, FrontierInputs inputs, std::optional<EnergyProblem> problem);
  Release release_round(Job& job);  // job.mutex held; answer() the waiters after releasing it
  void answer(const Round& round, std::vector<Waiter> waiters);  // a finished round
  void watch_barrier_deadline(std::chrono::steady_clock::time_point deadline, const JobPtr& job);
  void expire_barrier_waits();
  ApiError barrier_timeout_error(const Job& job) const;  // job.mutex held
  void recover();
  void worker_loop();
  void housekeeping_loop();
  // --dump-data: zeus's files (zeus_dump.hpp) and deployments.jsonl, perseus's log of the
  // plans deployed, in the job's folder under --dump-dir.
  std::filesystem::path dump_folder(const Job& job) const;
  void write_dump_file(const Job& job, const std::string& file, const std::function<std::string()>& content);
  void append_dump_line(const Job& job, const std::string& file, const std::string& line);

  ServiceOptions options_;
  DatabaseLock db_lock_;  // before store_: no second server opens the database meanwhile
  JobStore store_;
  Metrics metrics_;
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::steady_clock::time_point started_;

  mutable std::shared_mutex jobs_mutex_;
  std::map<std::string, JobPtr> jobs_;

  mutable std::mutex work_mutex_;
  std::condition_variable work_cv_;
  std::condition_variable housekeeping_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::unique_ptr<ComputeTask>> queue_;
  // When parked ranks' waits end (--barrier-timeout), for the housekeeping thread.
  std::multimap<std::chrono::steady_clock::time_point, std::weak_ptr<Job>> barrier_deadlines_;
  bool computing_ = false;
  bool stopping_ = false;  // guarded by work_mutex_
  std::atomic<bool> shutting_down_{false};  // read by barrier waiters without work_mutex_
  std::mutex dump_mutex_;
  std::thread worker_;
  std::thread housekeeper_;
};

}  // namespace perseus::server
