// `perseus cluster serve`'s routes: jobs submitted over the API finish as the live scheduler
// finishes them when given directly, bad requests get 4xx naming the field and the service goes
// on, a restarted service picks its jobs and measurements up from the database, and the routes
// answer over HTTP.
#include "perseus/cluster/cluster_service.hpp"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "matrices.hpp"
#include "temp_dir.hpp"

#include "perseus/cluster/emulated_backend.hpp"
#include "perseus/server/http_server.hpp"

namespace perseus::cluster {
namespace {

using json = nlohmann::json;
using server::ApiRequest;
using server::ApiResponse;
using perseus::testing::TempDir;
using testing::matrix_of;

ThroughputMatrix three_types() {
  return matrix_of({"k80", "p100", "v100"}, {{0.2, 0.5, 1.0}, {0.4, 0.6, 0.8}, {0.1, 0.3, 0.9}, {0.3, 0.7, 1.2}}, {1, 1, 1, 2});
}

// The emulated cluster of these tests: 2 + 2 + 4 GPUs, 2 to a server, unless told otherwise.
EmulatedCluster cluster_of(ThroughputMatrix truth, std::vector<int> workers = {2, 2, 4}) {
  return testing::cluster_of(std::move(truth), std::move(workers), 2);
}

ApiResponse call(ClusterService& s, std::string method, std::string path, std::string body = "", std::string token = "") {
  ApiRequest r;
  r.method = std::move(method);
  const std::size_t q = path.find('?');
  r.path = path.substr(0, q);
  if (q != std::string::npos) {
    const std::string query = path.substr(q + 1);
    r.query[query.substr(0, query.find('='))] = query.substr(query.find('=') + 1);
  }
  r.body = std::move(body);
  if (!token.empty()) r.authorization = "Bearer " + token;
  return s.handle(r);
}

json body_of(const ApiResponse& r) { return json::parse(r.body); }

std::string submission(int type, double steps) {
  return json{{"type", "job" + std::to_string(type)}, {"steps", steps}}.dump();
}

// Rounds until no job waits or runs.
void run_to_the_end(ClusterService& s, int max_rounds = 1000) {
  for (int r = 0; r < max_rounds; ++r) {
    const json status = body_of(call(s, "GET", "/status"));
    if (status["jobs"]["waiting"] == 0 && status["jobs"]["running"] == 0) return;
    s.run_round();
  }
  FAIL() << "jobs still running after " << max_rounds << " rounds";
}

TEST(ClusterService, JobsSubmittedOverTheApiFinishAsTheSchedulerFinishesThem) {
  const ThroughputMatrix t = three_types();
  const SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 360.0};
  std::vector<JobRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back({i % 4, 300.0 + 170.0 * i});

  EmulatedBackend direct_backend(cluster_of(t));
  ClusterScheduler direct(t, direct_backend, options);
  for (const JobRequest& r : requests) direct.submit(r);
  while (!direct.idle()) direct.run_round();

  EmulatedBackend backend(cluster_of(t));
  ClusterService service(t, backend, options, {});
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ApiResponse r = call(service, "POST", "/jobs", submission(requests[i].type, requests[i].steps));
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(body_of(r)["id"], i);
    EXPECT_EQ(body_of(r)["status"], "waiting");
  }
  EXPECT_EQ(body_of(call(service, "GET", "/jobs?status=waiting"))["jobs"].size(), requests.size());
  run_to_the_end(service);

  const json jobs = body_of(call(service, "GET", "/jobs"))["jobs"];
  ASSERT_EQ(jobs.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(jobs[i]["status"], "finished") << i;
    EXPECT_DOUBLE_EQ(jobs[i]["steps_done"].get<double>(), requests[i].steps) << i;
    EXPECT_NEAR(jobs[i]["jct_s"].get<double>(), direct.jobs()[i].finished_s - direct.jobs()[i].submitted_s, 1e-9) << i;
    EXPECT_EQ(jobs[i]["preemptions"], direct.jobs()[i].preemptions) << i;
  }
  EXPECT_EQ(body_of(call(service, "GET", "/jobs/3")), jobs[3]);
  const json status = body_of(call(service, "GET", "/status"));
  EXPECT_EQ(status["rounds"], direct.rounds_run());
  EXPECT_EQ(status["jobs"]["finished"], requests.size());
  EXPECT_EQ(status["workers"], json({2, 2, 4}));
  EXPECT_TRUE(status["last_error"].is_null());
}

TEST(ClusterService, ShowsTheAllocationAndWhatItMeasured) {
  // Told job0 runs on a K80 as fast as on a V100; it is 5x slower there.
  const ThroughputMatrix truth = three_types();
  ThroughputMatrix told = truth;
  told.steps_per_s[0][0] = 1.0;
  EmulatedBackend backend(cluster_of(truth, {1, 1, 1}));
  SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 100.0};
  options.measurement_weight = 1.0;
  ClusterService service(told, backend, options, {});
  for (int i = 0; i < 3; ++i) ASSERT_EQ(call(service, "POST", "/jobs", submission(0, 1e6)).status, 201);
  for (int r = 0; r < 12; ++r) service.run_round();

  const json allocation = body_of(call(service, "GET", "/allocation"));
  EXPECT_EQ(allocation["round"], 11);
  ASSERT_EQ(allocation["jobs"].size(), 3u);
  for (const json& j : allocation["jobs"]) {
    double total = 0.0;
    for (const auto& [gpu, share] : j["share"].items()) total += share.get<double>();
    EXPECT_LE(total, 1.0 + 1e-9);
  }
  EXPECT_EQ(allocation["leases"].size(), 3u);  // three jobs, three GPUs
  const json throughputs = body_of(call(service, "GET", "/throughputs"));
  EXPECT_DOUBLE_EQ(throughputs["given"]["job0 x1"][0].get<double>(), 1.0);
  EXPECT_NEAR(throughputs["measured"]["job0 x1"][0].get<double>(), 0.2, 1e-9);
  EXPECT_GT(throughputs["measurements"]["job0 x1"][0].get<int>(), 0);
}

TEST(ClusterService, BadRequestsGet4xxNamingWhatIsWrongAndTheServiceGoesOn) {
  const ThroughputMatrix t = three_types();
  EmulatedBackend backend(cluster_of(t));
  ClusterServiceOptions options;
  options.token = "s3cret";
  options.require_command = true;
  PolicySpec hierarchical(PolicyKind::kHierarchical);
  hierarchical.entities = {{"product", 1.0}, {"research", 2.0}};
  ClusterService service(t, backend, {hierarchical, 360.0}, options);
  const auto post = [&](const std::string& body, const std::string& token = "s3cret") {
    return call(service, "POST", "/jobs", body, token);
  };
  const auto detail = [](const ApiResponse& r) { return body_of(r)["detail"].get<std::string>(); };
  const std::string good = R"({"type": "job0 x1", "steps": 10, "command": "train"})";

  EXPECT_EQ(post(good, "").status, 401);
  EXPECT_EQ(post(good, "wrong").status, 401);
  EXPECT_EQ(post("not json").status, 400);
  EXPECT_EQ(post("[1, 2]").status, 400);
  EXPECT_NE(detail(post(R"({"steps": 10, "command": "x"})")).find("'type' is missing"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "command": "x"})")).find("'steps' is missing"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "nope", "steps": 10, "command": "x"})")).find("unknown job type 'nope'"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": -1, "command": "x"})")).find("-1 steps"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": "ten", "command": "x"})")).find("'steps' must be a number"),
            std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10, "weight": -2, "command": "x"})")).find("weight -2"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10, "slo_s": 0, "command": "x"})")).find("'slo_s'"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10, "entity": "ops", "command": "x"})")).find("'entity' 'ops'"),
            std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10})")).find("'command' is missing"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10, "command": "a\nb"})")).find("one line"), std::string::npos);
  EXPECT_NE(detail(post(R"({"type": "job0 x1", "steps": 10, "command": "x", "gpus": 2})")).find("unknown field 'gpus'"),
            std::string::npos);
  EXPECT_EQ(call(service, "GET", "/jobs/0").status, 404);
  EXPECT_EQ(call(service, "GET", "/jobs/abc").status, 404);
  EXPECT_EQ(call(service, "GET", "/jobs?status=lost").status, 400);
  EXPECT_EQ(call(service, "DELETE", "/jobs").status, 405);
  EXPECT_EQ(call(service, "POST", "/status").status, 405);
  EXPECT_EQ(call(service, "GET", "/nowhere").status, 404);

  // Nothing was queued by the refused requests; a good one is, dealt to an entity by name.
  EXPECT_EQ(service.job_count(), 0u);
  const ApiResponse ok = post(R"({"type": "job1 x1", "steps": 10, "entity": "research", "command": "train"})");
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(body_of(ok)["entity"], "research");
  EXPECT_EQ(body_of(call(service, "GET", "/healthz"))["status"], "ok");
}

TEST(ClusterService, ARestartedServicePicksUpItsJobsAndMeasurements) {
  const TempDir dir;
  const std::string db = (dir.path() / "cluster.db").string();
  const ThroughputMatrix truth = three_types();
  ThroughputMatrix told = truth;
  told.steps_per_s[1][2] = 2.0;  // measured: 0.8
  SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 360.0};
  options.measurement_weight = 1.0;
  ClusterServiceOptions on_disk;
  on_disk.db_path = db;
  std::vector<double> steps{50.0, 900.0, 1500.0, 2500.0, 1200.0};

  json before;
  {
    EmulatedBackend backend(cluster_of(truth));
    ClusterService first(told, backend, options, on_disk);
    for (std::size_t i = 0; i < steps.size(); ++i)
      ASSERT_EQ(call(first, "POST", "/jobs", submission(static_cast<int>(i % 4), steps[i])).status, 201);
    for (int r = 0; r < 4; ++r) first.run_round();
    // One server per database.
    EmulatedBackend other(cluster_of(truth));
    EXPECT_THROW(ClusterService(told, other, options, on_disk), InputError);
    // Submitted after the last round: saved, not yet the scheduler's.
    ASSERT_EQ(call(first, "POST", "/jobs", submission(2, 400.0)).status, 201);
    steps.push_back(400.0);
    before = body_of(call(first, "GET", "/jobs"))["jobs"];
    ASSERT_EQ(before[0]["status"], "finished");
    ASSERT_EQ(before[5]["status"], "waiting");
  }  // stops as a killed server would: no preemption

  EmulatedBackend backend(cluster_of(truth));
  ClusterService second(told, backend, options, on_disk);
  // Every job as it was; those that ran wait now for their next lease (nothing runs them yet).
  const json restored = body_of(call(second, "GET", "/jobs"))["jobs"];
  ASSERT_EQ(restored.size(), before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    json expected = before[i];
    if (expected["status"] == "running") expected["status"] = "waiting", expected["gpu"] = nullptr;
    EXPECT_EQ(restored[i], expected) << i;
  }
  const json status = body_of(call(second, "GET", "/status"));
  EXPECT_EQ(status["rounds"], 4);
  EXPECT_DOUBLE_EQ(status["clock_s"].get<double>(), 4 * 360.0);
  const json throughputs = body_of(call(second, "GET", "/throughputs"));
  EXPECT_NEAR(throughputs["measured"]["job1 x1"][2].get<double>(), 0.8, 1e-9);
  EXPECT_GT(throughputs["measurements"]["job1 x1"][2].get<int>(), 0);
  // Ids go on from the database's.
  const ApiResponse next = call(second, "POST", "/jobs", submission(0, 100.0));
  steps.push_back(100.0);
  EXPECT_EQ(body_of(next)["id"], 6);
  // They resume from their steps done, not from the start.
  second.run_round();
  const json resumed = body_of(call(second, "GET", "/jobs"))["jobs"];
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_GE(resumed[i]["steps_done"].get<double>(), before[i]["steps_done"].get<double>()) << i;

  run_to_the_end(second);
  const json after = body_of(call(second, "GET", "/jobs"))["jobs"];
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(after[i]["status"], "finished") << i;
    EXPECT_DOUBLE_EQ(after[i]["steps_done"].get<double>(), steps[i]) << i;
  }
  EXPECT_EQ(after[0], before[0]);  // over before the restart: untouched
  EXPECT_GT(body_of(call(second, "GET", "/status"))["rounds"].get<int>(), 4);

}

TEST(ClusterService, ACancelAskedForIsKeptAcrossARestartAndAppliedAtTheNextRound) {
  const TempDir dir;
  ClusterServiceOptions on_disk;
  on_disk.db_path = (dir.path() / "cluster.db").string();
  on_disk.token = "secret";
  const ThroughputMatrix t = three_types();
  const SchedulerOptions options{PolicySpec(PolicyKind::kMaxMinFairness), 360.0};
  {
    EmulatedBackend backend(cluster_of(t));
    ClusterService first(t, backend, options, on_disk);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(call(first, "POST", "/jobs", submission(i, 5000.0), "secret").status, 201);
    first.run_round();
    ASSERT_EQ(body_of(call(first, "GET", "/jobs/1"))["status"], "running");
    // Refused: without the token, an unknown job, another method.
    EXPECT_EQ(call(first, "DELETE", "/jobs/1").status, 401);
    EXPECT_EQ(call(first, "DELETE", "/jobs/9", "", "secret").status, 404);
    EXPECT_EQ(call(first, "DELETE", "/jobs/x", "", "secret").status, 404);
    EXPECT_EQ(call(first, "PUT", "/jobs/1", "", "secret").status, 405);
    const ApiResponse asked = call(first, "DELETE", "/jobs/1", "", "secret");
    ASSERT_EQ(asked.status, 202);
    EXPECT_EQ(body_of(asked)["cancel_requested"], true);
    EXPECT_EQ(body_of(asked)["status"], "running");  // until the next round's start
    EXPECT_EQ(call(first, "DELETE", "/jobs/1", "", "secret").status, 202);  // asked again: the same
    EXPECT_EQ(body_of(call(first, "GET", "/jobs/1"))["cancel_requested"], true);
  }  // stops as a killed server would, before the round that would cancel it

  EmulatedBackend backend(cluster_of(t));
  ClusterService second(t, backend, options, on_disk);
  EXPECT_EQ(body_of(call(second, "GET", "/jobs/1"))["cancel_requested"], true);
  second.run_round();
  const json cancelled = body_of(call(second, "GET", "/jobs/1"));
  EXPECT_EQ(cancelled["status"], "cancelled");
  EXPECT_EQ(cancelled["cancel_requested"], false);
  EXPECT_DOUBLE_EQ(cancelled["finished_s"].get<double>(), 360.0);  // the restored clock
  const double steps_done = cancelled["steps_done"].get<double>();
  EXPECT_GT(steps_done, 0.0);
  for (const json& lease : body_of(call(second, "GET", "/allocation"))["leases"]) EXPECT_NE(lease["id"], 1);
  const json status = body_of(call(second, "GET", "/status"));
  EXPECT_EQ(status["jobs"]["cancelled"], 1);
  EXPECT_EQ(status["jobs"]["running"], 2);
  const json listed = body_of(call(second, "GET", "/jobs?status=cancelled"))["jobs"];
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["id"], 1);
  // Over: cancelling again is a conflict, and the job stays as it ended.
  const ApiResponse again = call(second, "DELETE", "/jobs/1", "", "secret");
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(body_of(again)["detail"].get<std::string>().find("cancelled"), std::string::npos);
  run_to_the_end(second);
  const json jobs = body_of(call(second, "GET", "/jobs"))["jobs"];
  EXPECT_EQ(jobs[0]["status"], "finished");
  EXPECT_EQ(jobs[2]["status"], "finished");
  EXPECT_EQ(jobs[1]["status"], "cancelled");
  EXPECT_DOUBLE_EQ(jobs[1]["steps_done"].get<double>(), steps_done);
  EXPECT_EQ(call(second, "DELETE", "/jobs/0", "", "secret").status, 409);  // finished
}

TEST(ClusterService, ADatabaseOfAnotherMatrixIsRefusedByName) {
  const TempDir dir;
  ClusterServiceOptions on_disk;
  on_disk.db_path = (dir.path() / "cluster.db").string();
  const ThroughputMatrix t = three_types();
  {
    EmulatedBackend backend(cluster_of(t));
    ClusterService first(t, backend, {}, on_disk);
  }
  const ThroughputMatrix other = matrix_of({"a100", "h100"}, {{1.0, 2.0}});
  EmulatedBackend backend(cluster_of(other, {1, 1}));
  try {
    ClusterService second(other, backend, {}, on_disk);
    FAIL() << "opened a database of another matrix";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("written for GPU types"), std::string::npos) << e.what();
  }
  dir.write("junk.db", "this is not a database, it is text long enough to fill a page header.............");
  on_disk.db_path = (dir.path() / "junk.db").string();
  EXPECT_THROW(ClusterService(other, backend, {}, on_disk), InputError);
}

TEST(ClusterService, ServesOverHttpWhileItsRoundsRun) {
  const ThroughputMatrix t = three_types();
  EmulatedBackend backend(cluster_of(t));
  ClusterServiceOptions options;
  options.token = "s3cret";
  options.min_round_wall_s = 0.01;
  ClusterService service(t, backend, {PolicySpec(PolicyKind::kFifo), 360.0}, options);
  server::HttpOptions http_options;
  http_options.port = 0;
  server::HttpServer http(service, http_options);
  http.start();
  service.start();
  httplib::Client client("127.0.0.1", http.port());
  client.set_bearer_token_auth("s3cret");
  for (int i = 0; i < 4; ++i) {
    const auto r = client.Post("/jobs", submission(i, 200.0), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
  }
  // A job that would run for ever, cancelled over HTTP.
  ASSERT_EQ(client.Post("/jobs", submission(0, 1e9), "application/json")->status, 201);
  const auto cancelled = client.Delete("/jobs/4");
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(cancelled->status, 202) << cancelled->body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  json status;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto r = client.Get("/status");
    ASSERT_TRUE(r);
    status = json::parse(r->body);
    if (status["jobs"]["finished"] == 4 && status["jobs"]["cancelled"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status["jobs"]["finished"], 4) << status.dump();
  EXPECT_EQ(status["jobs"]["cancelled"], 1) << status.dump();
  httplib::Client anonymous("127.0.0.1", http.port());
  EXPECT_EQ(anonymous.Post("/jobs", submission(0, 1.0), "application/json")->status, 401);
  EXPECT_EQ(anonymous.Get("/jobs/2")->status, 200);
  service.stop(true);
  http.stop();
}

}  // namespace
}  // namespace perseus::cluster
