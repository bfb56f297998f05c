#include "perseus/server/job_store.hpp"

#include <sqlite3.h>

#include <gtest/gtest.h>

#include "perseus/model/errors.hpp"
#include "server_test_support.hpp"

namespace perseus::server {
namespace {

using testing::TempDir;
using json = nlohmann::json;

StoredJob sample_job(const std::string& id) {
  StoredJob job;
  job.job_id = id;
  job.info = {{"job_id", id}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", 2}};
  job.scheduler = "Frontier";
  job.created_at = 100.0;
  job.last_active = 150.0;
  job.state = {{"phase", "waiting"}};
  return job;
}

TEST(JobStore, EverythingWrittenIsReadBackAfterReopening) {
  TempDir dir;
  const std::string path = (dir.path() / "jobs.db").string();
  const std::string blob("PFT1\0\x01\x02\xff", 8);  // binary, with a NUL inside
  {
    JobStore store(path);
    store.insert_job(sample_job("a"));
    store.insert_job(sample_job("b"));
    store.insert_rank("a", 0, {{"rank", 0}, {"pp_rank", 0}});
    store.insert_rank("a", 1, {{"rank", 1}, {"pp_rank", 1}});
    store.save_profile("a", "stage,instruction,frequency,time,energy\n", {{"p_blocking", 80.0}}, {{"phase", "computing"}});
    store.save_frontier("a", blob, {{"phase", "frontier"}});
    store.save_last_active({{"b", 999.5}});
  }
  JobStore store(path);
  const auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id, "a");
  EXPECT_EQ(jobs[0].ranks.size(), 2u);
  EXPECT_EQ(jobs[0].ranks.at(1).at("pp_rank"), 1);
  EXPECT_EQ(jobs[0].state.at("phase"), "frontier");
  ASSERT_TRUE(jobs[0].profile_csv);
  EXPECT_EQ(jobs[0].profile_params.at("p_blocking"), 80.0);
  ASSERT_TRUE(jobs[0].frontier);
  EXPECT_EQ(*jobs[0].frontier, blob);
  EXPECT_EQ(jobs[1].last_active, 999.5);
  EXPECT_FALSE(jobs[1].profile_csv);
  EXPECT_EQ(store.check_consistency(), "ok");
}

TEST(JobStore, ANewProfileDropsTheStaleFrontier) {
  JobStore store(":memory:");
  store.insert_job(sample_job("a"));
  store.save_profile("a", "x", json::object(), {{"phase", "computing"}});
  store.save_frontier("a", "points", {{"phase", "frontier"}});
  store.save_profile("a", "y", json::object(), {{"phase", "computing"}});
  const auto jobs = store.load_all();
  EXPECT_FALSE(jobs[0].frontier);
  EXPECT_EQ(*jobs[0].profile_csv, "y");
}

TEST(JobStore, DeletingAJobDeletesWhatItOwns) {
  JobStore store(":memory:");
  store.insert_job(sample_job("a"));
  store.insert_rank("a", 0, {{"rank", 0}});
  store.save_profile("a", "x", json::object(), json::object());
  store.delete_job("a");
  EXPECT_EQ(store.count_jobs(), 0u);
  EXPECT_EQ(store.count_ranks(), 0u);
  EXPECT_TRUE(store.load_all().empty());
  EXPECT_EQ(store.check_consistency(), "ok");
}

TEST(JobStore, DuplicatesAndOrphansAreRefusedWithoutChangingAnything) {
  JobStore store(":memory:");
  store.insert_job(sample_job("a"));
  store.insert_rank("a", 0, {{"rank", 0}});
  EXPECT_THROW(store.insert_job(sample_job("a")), InputError);
  EXPECT_THROW(store.insert_rank("a", 0, {{"rank", 0}}), InputError);
  EXPECT_THROW(store.insert_rank("nope", 0, {{"rank", 0}}), InputError);  // foreign key
  EXPECT_EQ(store.count_jobs(), 1u);
  EXPECT_EQ(store.count_ranks(), 1u);
  EXPECT_EQ(store.check_consistency(), "ok");
}

TEST(JobStore, ConsistencyCheckFindsARankThatDescribesAnother) {
  JobStore store(":memory:");
  store.insert_job(sample_job("a"));
  store.insert_rank("a", 3, {{"rank", 4}});
  EXPECT_NE(store.check_consistency().find("rank 3"), std::string::npos);
}

TEST(JobStore, AFileThatIsNotAPerseusDatabaseIsRefused) {
  TempDir dir;
  const auto text = dir.write("notes.txt", "just some text, not SQLite at all................................");
  EXPECT_THROW(JobStore(text.string()), InputError);
  // A SQLite database of something else.
  const std::string other = (dir.path() / "other.db").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES('schema','x')",
               nullptr, nullptr, nullptr);
  sqlite3_close(db);
  try {
    JobStore store(other);
    FAIL() << "opened a foreign database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a perseus server database"), std::string::npos) << e.what();
  }
  EXPECT_THROW(JobStore((dir.path() / "missing-dir" / "x.db").string()), InputError);
}

}  // namespace
}  // namespace perseus::server
