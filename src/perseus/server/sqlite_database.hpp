// A SQLite connection for the stores that keep their state in SQLite (JobStore; the cluster
// server's ClusterStore): opened with a busy timeout and, for a file, write-ahead logging;
// statements that finalize themselves; exec and transactions. Every error is an InputError that
// names the database's file. Not thread-safe: each store serialises its calls with its own mutex.
#pragma once

#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace perseus::server {

class SqliteDatabase {
 public:
  // Opens (creating) `path`; ":memory:" keeps it in memory. `what` names it in the error when it
  // cannot be opened ("job database").
  SqliteDatabase(const std::string& path, const std::string& what);
  ~SqliteDatabase();
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  const std::string& path() const { return path_; }
  void exec(const char* sql) const;
  // BEGIN IMMEDIATE, body, COMMIT; an exception rolls back and propagates.
  template <typename F>
  void transaction(F&& body) const {
    exec("BEGIN IMMEDIATE");
    try {
      body();
      exec("COMMIT");
    } catch (...) {
      rollback();
      throw;
    }
  }

  // A prepared statement; binds by position from 1, reads columns from 0.
  class Statement {
   public:
    Statement(const SqliteDatabase& db, const char* sql);
    ~Statement();
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    Statement& text(int i, const std::string& value);
    Statement& blob(int i, const std::string& value);
    Statement& real(int i, double value);
    Statement& integer(int i, long long value);
    // True while rows come; false when done.
    bool step();
    void run();    // steps to the end
    void reset();  // and clears the bindings, to run again
    std::string column_text(int i) const;
    std::string column_blob(int i) const;
    double column_real(int i) const;
    long long column_integer(int i) const;

   private:
    [[noreturn]] void fail(const char* what) const;
    const SqliteDatabase& db_;
    sqlite3_stmt* stmt_ = nullptr;
  };

 private:
  [[noreturn]] void fail(const std::string& why) const;
  void rollback() const noexcept;
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace perseus::server
