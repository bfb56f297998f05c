// The server's durable state in SQLite: jobs, their ranks, profiles, frontiers and
// scheduler state. Every write is one transaction, so a server killed at any moment
// restarts from a consistent database (WAL journal; ':memory:' keeps nothing).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/server/sqlite_database.hpp"

namespace perseus::server {

struct StoredJob {
  std::string job_id;
  nlohmann::json info;         // JobInfo as JSON
  std::string scheduler;       // the scheduler the job was registered under
  double created_at = 0.0;     // s since the epoch
  double last_active = 0.0;
  nlohmann::json state;        // phase, layout, scheduler state, ...
  std::map<int, nlohmann::json> ranks;  // RankInfo as JSON, by rank
  std::optional<std::string> profile_csv;
  nlohmann::json profile_params;        // FrontierInputs minus the CSV
  std::optional<std::string> frontier;  // FrontierTable::serialize_points()
};

// One server per database, for the server's lifetime: an exclusive flock(2) on
// "<database>.lock" beside it, which holds the owner's pid. SQLite's locks last one
// transaction, so two servers would both open the database and then overwrite each other's
// jobs and round counts. The lock goes with the process, however it ends.
class DatabaseLock {
 public:
  // ":memory:" (or "") takes no lock. Throws InputError when another process holds it
  // ("... is in use by another perseus server (pid N)") or the lock file cannot be opened.
  explicit DatabaseLock(const std::string& db_path);
  ~DatabaseLock();
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

 private:
  int fd_ = -1;
};

class JobStore {
 public:
  // Opens (creating if needed) the database at `path`; ":memory:" for none.
  // Throws InputError naming the path when it cannot be opened or is not a perseus database.
  explicit JobStore(const std::string& path);
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  void insert_job(const StoredJob& job);  // job row only; throws InputError if it exists
  void insert_rank(const std::string& job_id, int rank, const nlohmann::json& info);
  void save_state(const std::string& job_id, const nlohmann::json& state);
  void save_last_active(const std::vector<std::pair<std::string, double>>& times);
  // Sets state.round (the job's count of released barrier rounds) without rewriting the rest.
  void save_round(const std::string& job_id, std::uint64_t round);
  // Profile and state in one transaction: a restart sees both or neither.
  void save_profile(const std::string& job_id, const std::string& csv, const nlohmann::json& params,
                    const nlohmann::json& state);
  void save_frontier(const std::string& job_id, const std::string& blob, const nlohmann::json& state);
  void delete_job(const std::string& job_id);

  std::vector<StoredJob> load_all() const;
  std::size_t count_jobs() const;
  std::size_t count_ranks() const;
  // "ok" or what is wrong: SQLite's integrity check, rows of unknown jobs, unparsable JSON.
  std::string check_consistency() const;

 private:
  template <typename F>
  void transaction(F&& body);

  SqliteDatabase db_;
  mutable std::mutex mutex_;
};

}  // namespace perseus::server
