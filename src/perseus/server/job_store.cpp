#include "perseus/server/job_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::server {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  job_id TEXT PRIMARY KEY,
  info TEXT NOT NULL,
  scheduler TEXT NOT NULL,
  created_at REAL NOT NULL,
  last_active REAL NOT NULL,
  state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ranks(
  job_id TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  info TEXT NOT NULL,
  PRIMARY KEY(job_id, rank));
CREATE TABLE IF NOT EXISTS profiles(
  job_id TEXT PRIMARY KEY REFERENCES jobs(job_id) ON DELETE CASCADE,
  csv TEXT NOT NULL,
  params TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frontiers(
  job_id TEXT PRIMARY KEY REFERENCES jobs(job_id) ON DELETE CASCADE,
  points BLOB NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES('schema', 'perseus.server/1');
)sql";

// Error texts inside the state may quote bytes of bad uploads: never fail on them.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

DatabaseLock::DatabaseLock(const std::string& db_path) {
  if (db_path.empty() || db_path == ":memory:") return;
  // Beside the file itself, so that two names of one database (a symlink) share the lock.
  std::error_code ignored;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(db_path, ignored);
  const std::string lock_path = (resolved.empty() ? std::filesystem::path(db_path) : resolved).string() + ".lock";
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw InputError(fmt::format("{}: cannot open the lock file {}: {}", db_path, lock_path, std::strerror(errno)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char buffer[32] = {};
    const ssize_t n = ::pread(fd_, buffer, sizeof(buffer) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) {
      throw InputError(fmt::format("{}: cannot lock {}: {}", db_path, lock_path, std::strerror(error)));
    }
    const std::string pid = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "unknown";
    throw InputError(fmt::format("{} is in use by another perseus server (pid {}); stop it, or give this one "
                                 "another --db",
                                 db_path, pid.substr(0, pid.find_first_of("\n "))));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; only the message of a second server is the poorer.
  }
}

DatabaseLock::~DatabaseLock() {
  if (fd_ >= 0) ::close(fd_);
}

using Statement = SqliteDatabase::Statement;

JobStore::JobStore(const std::string& path) : db_(path, "job database") {
  // WAL (SqliteDatabase) with synchronous=NORMAL survives a killed process (only a power cut may
  // lose the last transactions); foreign keys make deleting a job delete everything it owns.
  db_.exec("PRAGMA synchronous=NORMAL");
  db_.exec("PRAGMA foreign_keys=ON");
  db_.exec(kSchema);
  Statement schema(db_, "SELECT value FROM meta WHERE key='schema'");
  if (!schema.step() || schema.column_text(0) != "perseus.server/1")
    throw InputError(fmt::format("{}: not a perseus server database (schema '{}')", path, schema.column_text(0)));
}

template <typename F>
void JobStore::transaction(F&& body) {
  std::lock_guard lock(mutex_);
  db_.transaction(std::forward<F>(body));
}

void JobStore::insert_job(const StoredJob& job) {
  transaction([&] {
    Statement(db_, "INSERT INTO jobs(job_id, info, scheduler, created_at, last_active, state) VALUES(?,?,?,?,?,?)")
        .text(1, job.job_id)
        .text(2, dump(job.info))
        .text(3, job.scheduler)
        .real(4, job.created_at)
        .real(5, job.last_active)
        .text(6, dump(job.state))
        .run();
  });
}

void JobStore::insert_rank(const std::string& job_id, int rank, const nlohmann::json& info) {
  transaction([&] {
    Statement(db_, "INSERT INTO ranks(job_id, rank, info) VALUES(?,?,?)").text(1, job_id).integer(2, rank).text(3, dump(info)).run();
  });
}

void JobStore::save_state(const std::string& job_id, const nlohmann::json& state) {
  transaction([&] { Statement(db_, "UPDATE jobs SET state=? WHERE job_id=?").text(1, dump(state)).text(2, job_id).run(); });
}

void JobStore::save_last_active(const std::vector<std::pair<std::string, double>>& times) {
  if (times.empty()) return;
  transaction([&] {
    Statement update(db_, "UPDATE jobs SET last_active=? WHERE job_id=?");
    for (const auto& [id, t] : times) {
      update.real(1, t).text(2, id).run();
      update.reset();
    }
  });
}

void JobStore::save_round(const std::string& job_id, std::uint64_t round) {
  transaction([&] {
    Statement(db_, "UPDATE jobs SET state=json_set(state, '$.round', ?) WHERE job_id=?")
        .integer(1, static_cast<long long>(round))
        .text(2, job_id)
        .run();
  });
}

void JobStore::save_profile(const std::string& job_id, const std::string& csv, const nlohmann::json& params,
                            const nlohmann::json& state) {
  transaction([&] {
    Statement(db_, "INSERT OR REPLACE INTO profiles(job_id, csv, params) VALUES(?,?,?)")
        .text(1, job_id)
        .text(2, csv)
        .text(3, dump(params))
        .run();
    // A new profile makes any earlier frontier stale.
    Statement(db_, "DELETE FROM frontiers WHERE job_id=?").text(1, job_id).run();
    Statement(db_, "UPDATE jobs SET state=? WHERE job_id=?").text(1, dump(state)).text(2, job_id).run();
  });
}

void JobStore::save_frontier(const std::string& job_id, const std::string& blob, const nlohmann::json& state) {
  transaction([&] {
    Statement(db_, "INSERT OR REPLACE INTO frontiers(job_id, points) VALUES(?,?)").text(1, job_id).blob(2, blob).run();
    Statement(db_, "UPDATE jobs SET state=? WHERE job_id=?").text(1, dump(state)).text(2, job_id).run();
  });
}

void JobStore::delete_job(const std::string& job_id) {
  transaction([&] { Statement(db_, "DELETE FROM jobs WHERE job_id=?").text(1, job_id).run(); });
}

std::vector<StoredJob> JobStore::load_all() const {
  std::lock_guard lock(mutex_);
  std::vector<StoredJob> jobs;
  std::map<std::string, std::size_t> index;
  Statement all(db_, "SELECT job_id, info, scheduler, created_at, last_active, state FROM jobs ORDER BY created_at, job_id");
  while (all.step()) {
    StoredJob job;
    job.job_id = all.column_text(0);
    job.info = nlohmann::json::parse(all.column_text(1), nullptr, false);
    job.scheduler = all.column_text(2);
    job.created_at = all.column_real(3);
    job.last_active = all.column_real(4);
    job.state = nlohmann::json::parse(all.column_text(5), nullptr, false);
    index[job.job_id] = jobs.size();
    jobs.push_back(std::move(job));
  }
  Statement ranks(db_, "SELECT job_id, rank, info FROM ranks ORDER BY job_id, rank");
  while (ranks.step()) {
    const auto it = index.find(ranks.column_text(0));
    if (it == index.end()) continue;
    jobs[it->second].ranks[static_cast<int>(ranks.column_integer(1))] =
        nlohmann::json::parse(ranks.column_text(2), nullptr, false);
  }
  Statement profiles(db_, "SELECT job_id, csv, params FROM profiles");
  while (profiles.step()) {
    const auto it = index.find(profiles.column_text(0));
    if (it == index.end()) continue;
    jobs[it->second].profile_csv = profiles.column_text(1);
    jobs[it->second].profile_params = nlohmann::json::parse(profiles.column_text(2), nullptr, false);
  }
  Statement frontiers(db_, "SELECT job_id, points FROM frontiers");
  while (frontiers.step()) {
    const auto it = index.find(frontiers.column_text(0));
    if (it == index.end()) continue;
    jobs[it->second].frontier = frontiers.column_blob(1);
  }
  return jobs;
}

std::size_t JobStore::count_jobs() const {
  std::lock_guard lock(mutex_);
  Statement count(db_, "SELECT COUNT(*) FROM jobs");
  count.step();
  return static_cast<std::size_t>(count.column_integer(0));
}

std::size_t JobStore::count_ranks() const {
  std::lock_guard lock(mutex_);
  Statement count(db_, "SELECT COUNT(*) FROM ranks");
  count.step();
  return static_cast<std::size_t>(count.column_integer(0));
}

std::string JobStore::check_consistency() const {
  std::lock_guard lock(mutex_);
  {
    Statement integrity(db_, "PRAGMA integrity_check");
    if (integrity.step() && integrity.column_text(0) != "ok") return "integrity_check: " + integrity.column_text(0);
  }
  {
    Statement orphans(db_, "PRAGMA foreign_key_check");
    if (orphans.step()) return "foreign_key_check: a row of table '" + orphans.column_text(0) + "' has no job";
  }
  Statement jobs(db_, "SELECT job_id, info, state FROM jobs");
  while (jobs.step()) {
    for (int column : {1, 2}) {
      const auto parsed = nlohmann::json::parse(jobs.column_text(column), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return fmt::format("job {}: column {} is not a JSON object", jobs.column_text(0), column == 1 ? "info" : "state");
      }
    }
  }
  Statement ranks(db_, "SELECT job_id, rank, info FROM ranks");
  while (ranks.step()) {
    const auto parsed = nlohmann::json::parse(ranks.column_text(2), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || parsed.value("rank", -1) != ranks.column_integer(1)) {
      return fmt::format("job {} rank {}: info does not describe that rank", ranks.column_text(0),
                         ranks.column_integer(1));
    }
  }
  return "ok";
}

}  // namespace perseus::server
