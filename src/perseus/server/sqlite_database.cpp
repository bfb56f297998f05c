#include "perseus/server/sqlite_database.hpp"

#include <sqlite3.h>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::server {

SqliteDatabase::SqliteDatabase(const std::string& path, const std::string& what) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw InputError(fmt::format("{}: cannot open the {}: {}", path, what, message));
  }
  sqlite3_busy_timeout(db_, 5000);
  try {
    // A file that is not a database fails here, its first statement.
    if (path != ":memory:") exec("PRAGMA journal_mode=WAL");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

SqliteDatabase::~SqliteDatabase() { sqlite3_close(db_); }

void SqliteDatabase::fail(const std::string& why) const { throw InputError(fmt::format("{}: {}", path_, why)); }

void SqliteDatabase::exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    fail(message);
  }
}

void SqliteDatabase::rollback() const noexcept {
  char* ignored = nullptr;
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, &ignored);
  sqlite3_free(ignored);
}

SqliteDatabase::Statement::Statement(const SqliteDatabase& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.db_, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
}

SqliteDatabase::Statement::~Statement() { sqlite3_finalize(stmt_); }

void SqliteDatabase::Statement::fail(const char* what) const {
  db_.fail(fmt::format("{} failed: {}", what, sqlite3_errmsg(db_.db_)));
}

SqliteDatabase::Statement& SqliteDatabase::Statement::text(int i, const std::string& value) {
  sqlite3_bind_text(stmt_, i, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteDatabase::Statement& SqliteDatabase::Statement::blob(int i, const std::string& value) {
  sqlite3_bind_blob(stmt_, i, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteDatabase::Statement& SqliteDatabase::Statement::real(int i, double value) {
  sqlite3_bind_double(stmt_, i, value);
  return *this;
}

SqliteDatabase::Statement& SqliteDatabase::Statement::integer(int i, long long value) {
  sqlite3_bind_int64(stmt_, i, value);
  return *this;
}

bool SqliteDatabase::Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail("step");
}

void SqliteDatabase::Statement::run() {
  while (step()) {
  }
}

void SqliteDatabase::Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string SqliteDatabase::Statement::column_text(int i) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))) : std::string();
}

std::string SqliteDatabase::Statement::column_blob(int i) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))) : std::string();
}

double SqliteDatabase::Statement::column_real(int i) const { return sqlite3_column_double(stmt_, i); }

long long SqliteDatabase::Statement::column_integer(int i) const { return sqlite3_column_int64(stmt_, i); }

}  // namespace perseus::server
