// The `serve` command as its own process: killed with SIGKILL mid-job and restarted on the
// same database, it recovers every job and serves the same plans; SIGTERM stops it cleanly.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <future>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "perseus/server/frontier_table.hpp"
#include "perseus/server/job_store.hpp"
#include "perseus/server/zeus_dump.hpp"
#include "child_process.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::rank_of;
using testing::TempDir;

bool is_zeus_setting(std::string_view entry) {
  constexpr std::string_view kPrefix = "zeus_pfo_";
  if (entry.size() < kPrefix.size()) return false;
  for (std::size_t i = 0; i < kPrefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(entry[i])) != kPrefix[i]) return false;
  }
  return true;
}

// A `serve` child process; its stderr is drained by a thread so that logging never blocks it.
// Its environment is this one's without any ZEUS_PFO_* setting, plus `env` ("NAME=value").
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {})
      : child_(PERSEUS_SERVE_BINARY, args, options(env)) {}

  // The port from the "event=listening" log line; 0 if it does not come within 20 s.
  int wait_for_port() {
    static const std::regex listening("event=listening host=\\S+ port=(\\d+)");
    const std::optional<std::string> port = child_.wait_for_log(listening, 20s);
    return port ? std::stoi(*port) : 0;
  }
  int kill_and_wait(int signal) { return child_.kill_and_wait(signal); }
  std::string log() { return child_.log(); }

 private:
  static perseus::testing::ChildProcessOptions options(const std::vector<std::string>& env) {
    std::vector<std::string> environment;
    for (char** entry = environ; *entry; ++entry) {
      if (!is_zeus_setting(*entry)) environment.emplace_back(*entry);
    }
    environment.insert(environment.end(), env.begin(), env.end());
    perseus::testing::ChildProcessOptions o;
    o.environment = std::move(environment);
    return o;
  }
  perseus::testing::ChildProcess child_;
};

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  c.set_bearer_token_auth("restart-token");
  return c;
}

// Every rank's schedule of one round, by rank.
std::vector<std::string> fetch_round(int port, const std::string& id, int world_size) {
  std::vector<std::future<std::string>> pending;
  for (int r = 0; r < world_size; ++r) {
    pending.push_back(std::async(std::launch::async, [=] {
      auto res = client(port).Get(("/schedule/" + id + "?rank=" + std::to_string(r)).c_str());
      return res && res->status == 200 ? res->body : std::string("failed: ") + (res ? res->body : "no answer");
    }));
  }
  std::vector<std::string> out;
  for (auto& f : pending) out.push_back(f.get());
  return out;
}

TEST(ServeProcess, SurvivesSigkillAndServesTheSamePlans) {
  TempDir dir;
  const std::string db = (dir.path() / "server.db").string();
  const std::vector<std::string> args = {"serve", "--port", "0", "--db", db, "--token", "restart-token",
                                         "--log-level", "info", "--barrier-timeout", "20",
                                         "--dump-dir", (dir.path() / "dump").string()};
  constexpr int kPp = 2, kDp = 2;
  std::string frontier_job, waiting_job;
  std::vector<std::string> before;
  json jobs_before;
  {
    ServerProcess server(args);
    const int port = server.wait_for_port();
    ASSERT_GT(port, 0) << server.log();
    httplib::Client c = client(port);
    frontier_job = json::parse(c.Post("/register_job", testing::job_info(kPp, kDp, 1).dump(), "application/json")->body)
                       .get<std::string>();
    waiting_job = json::parse(c.Post("/register_job", testing::job_info(1, 1, 1, {{"microbatches", 3}, {"job_metadata", "w"}}).dump(),
                                     "application/json")
                                  ->body)
                      .get<std::string>();
    for (int d = 0; d < kDp; ++d) {
      for (int p = 0; p < kPp; ++p) {
        const json rank = {{"rank", rank_of(kPp, 1, d, p, 0)}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", 0},
                           {"available_frequencies", {1410, 1350, 1290, 1230, 1170, 1110}}};
        ASSERT_EQ(c.Post(("/register_rank/" + frontier_job).c_str(), rank.dump(), "application/json")->status, 200);
      }
    }
    const std::string csv = profile_to_csv(perseus::testing::synthetic_profile(kPp, 6, 5));
    ASSERT_EQ(c.Post(("/profile/" + frontier_job + "?p_blocking=80&microbatches=4").c_str(), csv, "text/csv")->status, 202);
    for (int i = 0; i < 600; ++i) {  // the frontier is computed in the background
      const json jobs = json::parse(c.Get("/api/jobs")->body).at("jobs");
      if (std::any_of(jobs.begin(), jobs.end(), [](const json& j) { return j.at("phase") == "frontier"; })) break;
      std::this_thread::sleep_for(50ms);
    }
    auto straggler = c.Post("/straggler", json({{"job_id", frontier_job}, {"id", rank_of(kPp, 1, 1, 0, 0)}, {"degree", 1.2}}).dump(),
                            "application/json");
    ASSERT_TRUE(straggler);
    ASSERT_EQ(straggler->status, 200) << straggler->body << server.log();
    before = fetch_round(port, frontier_job, kPp * kDp);
    jobs_before = json::parse(c.Get("/api/jobs")->body).at("jobs");
    const int status = server.kill_and_wait(SIGKILL);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  for (const std::string& b : before) ASSERT_EQ(b.rfind("failed", 0), std::string::npos) << b;
  EXPECT_NE(before[rank_of(kPp, 1, 0, 0, 0)], before[rank_of(kPp, 1, 1, 0, 0)]);  // the straggler changed pipeline 0

  ServerProcess server(args);
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  EXPECT_EQ(fetch_round(port, frontier_job, kPp * kDp), before);
  const json jobs_after = json::parse(client(port).Get("/api/jobs")->body).at("jobs");
  ASSERT_EQ(jobs_after.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(jobs_after[i].at("job_id"), jobs_before[i].at("job_id"));
    EXPECT_EQ(jobs_after[i].at("phase"), jobs_before[i].at("phase"));
    // A job still waiting for its profile has no frontier (null).
    const auto points = [](const json& job) {
      const json frontier = job.value("frontier", json());
      return frontier.is_object() ? frontier.value("points", json()) : json();
    };
    EXPECT_EQ(points(jobs_after[i]), points(jobs_before[i]));
    EXPECT_EQ(jobs_after[i].value("stragglers", json()), jobs_before[i].value("stragglers", json()));
  }
  const auto waiting = fetch_round(port, waiting_job, 1);
  EXPECT_EQ(waiting[0], "failed: {\"detail\":\"rank 0 has not registered with job " + waiting_job +
                            " (POST /register_rank/{job_id} first)\"}");
  const int status = server.kill_and_wait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << server.log();
  EXPECT_NE(server.log().find("event=stopped"), std::string::npos);
  EXPECT_EQ(JobStore(db).check_consistency(), "ok");
}

// Waits up to 20 s for `text` in the server's log.
bool wait_for_log(ServerProcess& server, const std::string& text, std::size_t times = 1) {
  for (int i = 0; i < 2000; ++i) {
    const std::string log = server.log();
    std::size_t found = 0;
    for (std::size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++found;
    if (found >= times) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(ServeProcess, AComputationThatKeepsKillingTheServerIsMarkedFailed) {
  TempDir dir;
  const std::string db = (dir.path() / "server.db").string();
  const std::vector<std::string> args = {"serve", "--port", "0", "--db", db, "--token", "restart-token",
                                         "--dump-dir", (dir.path() / "dump").string()};
  std::string id;
  {
    ServerProcess server(args);
    const int port = server.wait_for_port();
    ASSERT_GT(port, 0) << server.log();
    httplib::Client c = client(port);
    id = json::parse(c.Post("/register_job", testing::job_info(8, 1, 1).dump(), "application/json")->body)
             .get<std::string>();
    // A computation of seconds (2 us crawl steps), so that it is surely under way when killed.
    const std::string csv = profile_to_csv(perseus::testing::synthetic_profile(8, 6, 21));
    auto uploaded = c.Post(("/profile/" + id + "?p_blocking=80&microbatches=12&unit_time=0.000002").c_str(), csv,
                           "text/csv");
    ASSERT_TRUE(uploaded);
    ASSERT_EQ(uploaded->status, 202) << uploaded->body;
    // What a computation that crashes the server (or brings the OOM killer) looks like.
    ASSERT_TRUE(wait_for_log(server, "event=frontier_started")) << server.log();
    server.kill_and_wait(SIGKILL);
  }
  {
    ServerProcess server(args);  // the restart tries once more...
    ASSERT_GT(server.wait_for_port(), 0) << server.log();
    ASSERT_TRUE(wait_for_log(server, "event=frontier_started")) << server.log();
    EXPECT_NE(server.log().find("attempt=2"), std::string::npos) << server.log();
    server.kill_and_wait(SIGKILL);
  }
  for (int start = 0; start < 2; ++start) {  // ...and then no more: the job fails, the server serves
    ServerProcess server(args);
    const int port = server.wait_for_port();
    ASSERT_GT(port, 0) << server.log();
    const json jobs = json::parse(client(port).Get("/api/jobs")->body).at("jobs");
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(jobs[0].at("phase"), "failed");
    EXPECT_EQ(jobs[0].at("error"), "frontier computation did not finish in 2 attempts (crashed?)");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(server.log().find("event=frontier_started"), std::string::npos) << server.log();
    EXPECT_EQ(client(port).Get("/healthz")->status, 200);
    const int status = server.kill_and_wait(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << server.log();
  }
}

TEST(ServeProcess, ASecondServerOnTheSameDatabaseRefusesToStart) {
  TempDir dir;
  const std::string db = (dir.path() / "server.db").string();
  ServerProcess first({"serve", "--port", "0", "--db", db});
  const int port = first.wait_for_port();
  ASSERT_GT(port, 0) << first.log();
  {
    ServerProcess second({"serve", "--port", "0", "--db", db});
    ASSERT_TRUE(wait_for_log(second, "is in use")) << second.log();
    const int status = second.kill_and_wait(0);  // already exiting: only waits
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << second.log();
    EXPECT_EQ(second.log().find("event=listening"), std::string::npos) << second.log();
    const std::regex message("perseus: error: " + db + " is in use by another perseus server \\(pid \\d+\\)");
    EXPECT_TRUE(std::regex_search(second.log(), message)) << second.log();
  }
  EXPECT_EQ(client(port).Get("/healthz")->status, 200);  // the first serves on
  EXPECT_EQ(first.kill_and_wait(SIGTERM), 0);
  ServerProcess third({"serve", "--port", "0", "--db", db});
  EXPECT_GT(third.wait_for_port(), 0) << third.log();
}

TEST(ServeProcess, RefusesBadSettingsWithAClearMessage) {
  TempDir dir;
  const std::string db = (dir.path() / "x.db").string();
  {
    ServerProcess server({"serve", "--port", "0", "--db", db, "--scheduler", "PointSolution"});
    std::this_thread::sleep_for(10ms);
    for (int i = 0; i < 500 && server.log().find("solution_path") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_NE(server.log().find("PointSolution needs {\"solution_path\""), std::string::npos) << server.log();
  }
  {
    ServerProcess server({"serve", "--port", "0", "--db", db, "--scheduler-args", "{oops"});
    for (int i = 0; i < 500 && server.log().find("not valid JSON") == std::string::npos; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_NE(server.log().find("not valid JSON"), std::string::npos) << server.log();
  }
}

// A path segment as the perseus client writes it: everything but unreserved characters as %XX.
std::string percent_encode(const std::string& segment) {
  std::string out;
  for (unsigned char c : segment) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

// zeus's settings as pydantic's BaseSettings reads them: names in any case, NOTSET the lowest
// log level, dumps on unless turned off; PointSolution3D serves every rank its stage's list.
TEST(ServeProcess, ReadsZeusSettingsAsPydanticDoes) {
  TempDir dir;
  const auto plan = dir.write("freqs_pipeline_00001.py", "[[('forward', 1410)], [('forward', 1300)]]\n");
  const std::filesystem::path dump = dir.path() / "dumps";
  ServerProcess server({"serve", "--port", "0", "--db", (dir.path() / "x.db").string()},
                       {"zeus_pfo_scheduler=PointSolution3D",
                        "Zeus_Pfo_Scheduler_Args={\"solution_path\": \"" + plan.string() + "\"}",
                        "zeus_pfo_log_level=NOTSET", "zeus_pfo_dump_dir=" + dump.string()});
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << server.log();
  httplib::Client c = client(port);
  const json info = json::parse(c.Get("/info")->body);
  EXPECT_EQ(info.at("scheduler"), "PointSolution3D");
  EXPECT_EQ(info.at("dump_data"), true);  // zeus's default

  // Two pipelines of two stages, under an id whose metadata its URLs must percent-encode.
  const auto registered =
      c.Post("/register_job", testing::job_info(2, 2, 1, {{"job_metadata", "run 1/a%b\\c?d#e"}}).dump(), "application/json");
  ASSERT_EQ(registered->status, 200) << registered->body;
  const std::string id = json::parse(registered->body).get<std::string>();
  EXPECT_TRUE(id.ends_with("+dp2+pp2+tp1+PointSolution3D+run 1/a%b\\c?d#e")) << id;
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      const json rank = {{"rank", rank_of(2, 1, d, p, 0)}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", 0},
                         {"available_frequencies", {1410, 1300}}};
      const auto answer = c.Post(("/register_rank/" + percent_encode(id)).c_str(), rank.dump(), "application/json");
      ASSERT_EQ(answer->status, 200) << answer->body;
    }
  }
  const std::vector<std::string> answers = fetch_round(port, percent_encode(id), 4);
  for (int r = 0; r < 4; ++r) {
    const json expected = {{"frequencies", json::array({json::array({"forward", r % 2 == 0 ? 1410 : 1300})})},
                           {"rank", r}};
    EXPECT_EQ(answers[static_cast<std::size_t>(r)], expected.dump()) << "rank " << r;
  }
  EXPECT_NE(server.log().find("level=debug event=register_rank"), std::string::npos) << server.log();
  EXPECT_TRUE(std::filesystem::is_regular_file(dump / dump_folder_name(id) / "ranks.json"));
  EXPECT_EQ(server.kill_and_wait(SIGTERM), 0);

  // Booleans as pydantic reads them, any case.
  const std::vector<std::pair<std::string, bool>> booleans = {{"t", true},  {"Y", true},   {"On", true}, {"1", true},
                                                              {"yes", true}, {"TRUE", true}, {"f", false}, {"n", false},
                                                              {"OFF", false}, {"0", false}, {"No", false}, {"False", false}};
  for (const auto& [text, value] : booleans) {
    ServerProcess with({"serve", "--port", "0", "--db", ":memory:"}, {"ZEUS_PFO_DUMP_DATA=" + text});
    const int with_port = with.wait_for_port();
    ASSERT_GT(with_port, 0) << with.log();
    EXPECT_EQ(json::parse(client(with_port).Get("/info")->body).at("dump_data"), value) << text;
  }
  ServerProcess flag({"serve", "--port", "0", "--db", ":memory:", "--no-dump-data"}, {"ZEUS_PFO_DUMP_DATA=yes"});
  const int flag_port = flag.wait_for_port();
  ASSERT_GT(flag_port, 0) << flag.log();
  EXPECT_EQ(json::parse(client(flag_port).Get("/info")->body).at("dump_data"), false);  // the flag wins
}

// Settings it cannot read stop the server at start-up, saying which and why.
TEST(ServeProcess, RefusesZeusSettingsItCannotReadWithAClearMessage) {
  TempDir dir;
  const auto flat = dir.write("freqs_pipeline_00001.py", "[[\"forward\", 1410], [\"backward\", 1410]]\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"ZEUS_PFO_DUMP_DATA=maybe"}, "ZEUS_PFO_DUMP_DATA: expected a boolean"},
      {{"ZEUS_PFO_DUMP_DATA="}, "ZEUS_PFO_DUMP_DATA: expected a boolean"},
      {{"ZEUS_PFO_LOG_LEVEL=loud"}, "ZEUS_PFO_LOG_LEVEL: unknown level 'loud'"},
      {{"ZEUS_PFO_SCHEDULER=Frontier", "zeus_pfo_scheduler=PointSolution"}, "settings ignore case, so set one"},
      {{"zeus_pfo_scheduler_args={\"microbatches\": 4.5}"}, "'microbatches' must be a whole number, got 4.5"},
      {{"ZEUS_PFO_MAX_JOB_IDLE_TIME=soon"}, "ZEUS_PFO_MAX_JOB_IDLE_TIME: expected a positive number of seconds"},
      {{"ZEUS_PFO_SCHEDULER=PointSolution", "ZEUS_PFO_SCHEDULER_ARGS={\"solution_path\": \"" + flat.string() + "\"}"},
       "solution_path: " + flat.string() + ": expected a plan, one list of (instruction, frequency) pairs per pipeline stage"},
  };
  for (const auto& [env, message] : cases) {
    ServerProcess server({"serve", "--port", "0", "--db", (dir.path() / "x.db").string()}, env);
    ASSERT_TRUE(wait_for_log(server, "perseus: error:")) << server.log();
    const int status = server.kill_and_wait(0);  // already exiting: only waits
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << server.log();
    EXPECT_NE(server.log().find(message), std::string::npos) << server.log();
  }
}

}  // namespace
}  // namespace perseus::server
