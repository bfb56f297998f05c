// What `perseus cluster serve` keeps across restarts (docs/cluster.md, "Serving a cluster"), in
// SQLite: every job submitted (request and progress, as the API shows it) and the scheduler's
// clock and measured throughputs. Every write is one transaction (WAL journal), so a server
// killed at any moment restarts from the state after its last submission or round.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/cluster/cluster_scheduler.hpp"
#include "perseus/server/sqlite_database.hpp"


namespace perseus::cluster {

// A job as the API shows it and the store keeps it: its request (type and entity by name),
// status, progress and where it runs.
nlohmann::json job_to_json(const ScheduledJob& job, const ThroughputMatrix& matrix, const PolicySpec& policy);
// The inverse; InputError naming the field for a missing or malformed one, or a type or entity
// the matrix or policy does not know.
ScheduledJob job_from_json(const nlohmann::json& json, const ThroughputMatrix& matrix, const PolicySpec& policy);

// The scheduler's state besides its jobs: its clock, rounds run, and the throughputs as
// measured (figures and measurement counts per job type and GPU type).
struct SchedulerState {
  double clock_s = 0.0;
  int rounds = 0;
  std::vector<std::vector<double>> steps_per_s;
  std::vector<std::vector<int>> measurements;
};

// Thread-safe: every call is serialized.
class ClusterStore {
 public:
  // Opens (creating if needed) the database at `path` (":memory:": nothing kept) for a cluster of
  // this matrix. InputError naming the path when it cannot be opened, is not a perseus cluster
  // database, or was written for other GPU types or job types.
  ClusterStore(const std::string& path, const ThroughputMatrix& matrix);
  ClusterStore(const ClusterStore&) = delete;
  ClusterStore& operator=(const ClusterStore&) = delete;

  void add_job(int id, const nlohmann::json& job);
  // After a round: the jobs it changed and the scheduler's state, together.
  void save_round(const std::vector<std::pair<int, nlohmann::json>>& jobs, const SchedulerState& state);

  // Every job by id (0, 1, ...), and the state (before the first round: clock 0, rounds 0,
  // no figures).
  std::vector<nlohmann::json> load_jobs() const;
  SchedulerState load_state() const;

 private:
  void put_job(int id, const nlohmann::json& job);

  server::SqliteDatabase db_;
  // One writer at a time on the connection: a submission's insert must not land inside (and be
  // rolled back with) a round's transaction.
  mutable std::mutex mutex_;
};

}  // namespace perseus::cluster
