// `perseus cluster serve` (docs/cluster.md, "Serving a cluster"): the live scheduler
// (cluster_scheduler.hpp) behind HTTP/JSON routes, its state in SQLite (cluster_store.hpp).
// Users submit jobs while it runs; a thread of its own runs the rounds on the backend while
// there are jobs; every route reads the picture the last round (or submission) left, so none
// waits for a round.
//
//   GET  /healthz            {"status": "ok"}
//   GET  /status             policy, rounds, clock, GPUs up, jobs per status, the last error
//   GET  /jobs[?status=S]    every job (or those of status S): request, status, progress
//   GET  /jobs/{id}          one job
//   DELETE /jobs/{id}        -> 202 and the job, "cancel_requested": true; the next round's start
//                            cancels it (the backend stops it for good; status "cancelled")
//   POST /jobs               {"type": job type name, "steps": N, optional "weight", "slo_s",
//                            "entity", "command"} -> 201 and the job; its first round is the next
//   GET  /allocation         each job's share of time per GPU type, and the last round's leases
//   GET  /throughputs        the matrix as given and as measured, with measurement counts
//
// Errors are {"detail": "..."} with 400 (a bad field, named), 401 (POST or DELETE without the
// token), 404, 405, 409 (cancelling a job already over). A restarted server picks up its jobs and measurements from the database (the rounds'
// history of time received starts afresh).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/cluster/cluster_scheduler.hpp"
#include "perseus/cluster/cluster_store.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/job_store.hpp"

namespace spdlog {
class logger;
}

namespace perseus::cluster {

struct ClusterServiceOptions {
  std::string db_path = ":memory:";
  std::string token;  // empty: no authentication
  // A round lasts at least this long on the wall clock. The emulated backend's rounds take no
  // time of their own: paced at their length, the emulated cluster runs in real time.
  double min_round_wall_s = 0.0;
  // The backend runs each job's command (Slurm): a submission without one is refused.
  bool require_command = false;
  std::shared_ptr<spdlog::logger> logger;  // null: no logs
};

class ClusterService : public server::RequestHandler {
 public:
  // Locks and opens the database and restores the jobs and measurements in it (jobs not over
  // are handed to the backend again). InputError for a database another server holds, one of
  // another matrix, or options the scheduler rejects.
  ClusterService(ThroughputMatrix matrix, ClusterBackend& backend, SchedulerOptions options, ClusterServiceOptions service);
  ~ClusterService() override;  // stop(false)
  ClusterService(const ClusterService&) = delete;
  ClusterService& operator=(const ClusterService&) = delete;

  void handle_async(const server::ApiRequest& request, Responder respond) override;
  server::ApiResponse handle(const server::ApiRequest& request);
  void record_rejected(const server::ApiRequest& request, int status) override;
  // GETs read the last picture: they run on the event loop. POST and DELETE write the database.
  bool runs_on_loop(const server::ApiRequest& request) const override { return request.method == "GET"; }

  // One round now, on this thread: the jobs submitted since the last are handed over, the
  // scheduler runs its round, the database and the picture are updated. An error of the round
  // (a policy that cannot be solved, a backend that fails) is logged and shown by /status; the
  // next round tries again. Not while start()'s thread runs.
  void run_round();
  // Runs rounds on a thread of its own while there are jobs (each at least min_round_wall_s).
  void start();
  // Ends the rounds (a round in progress is cut short); with `preempt`, every unfinished job
  // then checkpoints and stops (it resumes when a server on this database runs again).
  void stop(bool preempt);

  std::size_t job_count() const;
  int rounds_run() const;

 private:
  server::ApiResponse route(const server::ApiRequest& request);
  server::ApiResponse submit(const server::ApiRequest& request);
  server::ApiResponse cancel(const server::ApiRequest& request, std::size_t id);
  // Rebuilds the picture from the scheduler (round thread only) and saves what changed.
  void publish(const RoundLog* log);
  void loop();

  const ThroughputMatrix given_;  // the matrix as started, for validation and /throughputs
  ClusterBackend& backend_;
  const SchedulerOptions options_;
  const ClusterServiceOptions service_;
  server::DatabaseLock lock_;
  ClusterStore store_;
  std::unique_ptr<ClusterScheduler> scheduler_;  // the round thread's alone
  std::shared_ptr<spdlog::logger> log_;
  int rounds_before_ = 0;  // rounds run by the servers before this one (the database's)

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::vector<JobRequest> pending_;  // submitted, not yet handed to the scheduler
  std::vector<int> cancels_;         // job ids asked to be cancelled, not yet applied
  std::vector<nlohmann::json> jobs_;  // the picture: every job by id
  nlohmann::json allocation_, throughputs_;
  ClusterTopology topology_;
  double clock_s_ = 0.0;
  int rounds_ = 0;
  bool busy_ = false;  // jobs waiting or running
  std::string last_error_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace perseus::cluster
