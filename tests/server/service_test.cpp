// The routes, driven without sockets: the existing protocol (registration, barrier,
// results), errors, authentication, expiry, profile upload, in-vivo profiling, frontier
// plans, stragglers and recovery from the database.
#include "perseus/server/service.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/server/frontier_table.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::body_of;
using testing::call;
using testing::fetch_round;
using testing::frequencies_of;
using testing::rank_of;
using testing::register_job;
using testing::register_ranks;
using testing::TempDir;

const std::vector<int> kFrequencies = {1410, 1350, 1290, 1230, 1170, 1110};  // synthetic_profile's, 6 of them

ServiceOptions frontier_options() {
  ServiceOptions options;
  options.scheduler = parse_scheduler_config("Frontier", json::object());
  options.barrier_timeout_s = 20.0;
  return options;
}

// The frontier computed straight from the library, to compare the server's plans with.
struct Expected {
  EnergyProblem problem;
  Frontier frontier;
  std::vector<double> times;

  PipelineFrequencies plan(std::size_t index) const {
    PipelineFrequencies out;
    const Plan plan = make_plan(problem, frontier.points[index].option_choice());
    for (const auto& stage : plan.stages) {
      auto& list = out.emplace_back();
      for (const PlannedInstruction& p : stage) list.emplace_back(std::string(to_string(p.instruction.kind)), p.frequency_mhz);
    }
    return out;
  }
};

Expected expected_frontier(const Profile& profile, int stages, int microbatches, double p_blocking) {
  std::vector<Warning> warnings;
  EnergyProblem problem = make_problem(profile, ScheduleSpec{ScheduleKind::k1F1B, stages, microbatches, 1, false},
                                       OptionsConfig{0.001, p_blocking, {}}, &warnings);
  const CrawlResult crawl = crawl_frontier(problem);
  Frontier frontier = build_frontier(problem, crawl);
  std::vector<double> times;
  for (const FrontierPoint& p : frontier.points) times.push_back(p.measured.time_s);
  return Expected{std::move(problem), std::move(frontier), std::move(times)};
}

json job_entry(Service& service, const std::string& job_id) {
  const json all = body_of(call(service, "GET", "/api/jobs"));  // a named object: the loop reads into it
  for (const json& job : all.at("jobs")) {
    if (job.at("job_id") == job_id) return job;
  }
  return nullptr;
}

std::string upload(Service& service, const std::string& job_id, const std::string& csv, int microbatches,
                   double p_blocking = 80.0, int expected_status = 202) {
  const ApiResponse response =
      call(service, "POST", "/profile/" + job_id, csv,
           {{"p_blocking", std::to_string(p_blocking)}, {"unit_time", "0.001"}, {"microbatches", std::to_string(microbatches)},
            {"schedule", "1f1b"}});
  EXPECT_EQ(response.status, expected_status) << response.body;
  return response.body;
}

// ---- the existing protocol ----

TEST(Service, PointSolutionServesEachRankItsStagesPlan) {
  TempDir dir;
  const auto plan = dir.write("freqs_pipeline_00042.py",
                              "[\n[('forward', 1410), ('forward', 1200), ('backward', 1100)],\n"
                              "[('forward', 990), ('backward', 1005)],\n]\n# Iteration 42 cost change: 0.1\n");
  ServiceOptions options;
  options.scheduler = parse_scheduler_config("PointSolution", {{"solution_path", plan.string()}});
  Service service(options);
  const std::string id = register_job(service, 2, 2, 1, {{"job_metadata", "bloom"}});
  EXPECT_TRUE(id.ends_with("+dp2+pp2+tp1+PointSolution+bloom")) << id;
  register_ranks(service, id, 2, 2, 1, {1410, 1200});
  for (int round = 0; round < 2; ++round) {
    const auto answers = fetch_round(service, id, 4);
    for (int r = 0; r < 4; ++r) {
      ASSERT_EQ(answers[r].status, 200) << answers[r].body;
      EXPECT_EQ(body_of(answers[r]).at("rank"), r);
      const int pp_rank = r % 2;  // rank_of(pp=2, tp=1, d, p, 0) = 2d + p
      const StageFrequencies stage0 = {{"forward", 1410}, {"forward", 1200}, {"backward", 1100}};
      const StageFrequencies stage1 = {{"forward", 990}, {"backward", 1005}};
      EXPECT_EQ(frequencies_of(answers[r]), pp_rank == 0 ? stage0 : stage1) << "rank " << r;
    }
  }
  EXPECT_EQ(job_entry(service, id).at("rounds"), 2);
  // Results are accepted (and ignored) by a fixed plan.
  EXPECT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0, "iter_time": [1.0]})").body, "null");
  // A job whose pipeline does not match the plan is refused up front.
  const ApiResponse wrong = call(service, "POST", "/register_job", testing::job_info(3, 1, 1).dump());
  EXPECT_EQ(wrong.status, 422);
  EXPECT_NE(body_of(wrong).at("detail").get<std::string>().find("2 stages"), std::string::npos);
}

// PointSolution on a `perseus optimize` directory: one plan of its store, by row or deadline.
TEST(Service, PointSolutionServesAPlanOfAFrontierDirectory) {
  TempDir dir;
  const EnergyProblem problem = perseus::testing::synthetic_problem({ScheduleKind::k1F1B, 2, 3, 1, false}, 10, 4);
  const CrawlResult crawl = crawl_frontier(problem);
  const Frontier frontier = build_frontier(problem, crawl);
  const std::string out = (dir.path() / "frontier").string();
  write_frontier_directory(out, problem, crawl, frontier, RunInfo{"synthetic.csv", {}, 0.0, {}}, {});
  const FrontierIndex index = read_frontier_directory(out);
  const std::size_t last = frontier.points.size() - 1;

  SchedulerConfig by_row = parse_scheduler_config("PointSolution", {{"solution_path", out}, {"plan", last}});
  EXPECT_EQ(by_row.point_plan, index.frequencies(last));
  const double deadline = (frontier.points[1].measured.time_s + frontier.points[2].measured.time_s) / 2;
  SchedulerConfig by_deadline = parse_scheduler_config("PointSolution", {{"solution_path", out}, {"deadline_s", deadline}});
  EXPECT_EQ(by_deadline.point_plan, index.frequencies(1));

  ServiceOptions options;
  options.scheduler = by_row;
  Service service(options);
  const std::string id = register_job(service, 2, 1, 1, {{"job_metadata", "synthetic"}});
  register_ranks(service, id, 2, 1, 1, {1410, 1200});
  const auto answers = fetch_round(service, id, 2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(answers[r].status, 200) << answers[r].body;
    EXPECT_EQ(frequencies_of(answers[r]), index.frequencies(last)[static_cast<std::size_t>(r)]) << "rank " << r;
  }

  const auto refused = [&](const json& args, const std::string& message) {
    try {
      parse_scheduler_config("PointSolution", args);
      ADD_FAILURE() << "accepted " << args.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused({{"solution_path", out}}, "give one of");
  refused({{"solution_path", out}, {"plan", 0}, {"deadline_s", 1.0}}, "give one of");
  refused({{"solution_path", out}, {"plan", last + 1}}, "'plan' must be a row");
  refused({{"solution_path", out}, {"deadline_s", frontier.points[0].measured.time_s / 2}}, "no plan finishes within");
  refused({{"solution_path", out + "/freqs_pipeline_00000.py"}, {"plan", 0}}, "need a frontier directory");
}

TEST(Service, PlanFilesAreReadAsDataNeverRun) {
  TempDir dir;
  const auto marker = dir.path() / "was-run";
  const auto evil = dir.write("freqs_pipeline_00001.py", "__import__('os').system('touch " + marker.string() + "')\n");
  EXPECT_THROW(parse_scheduler_config("PointSolution", {{"solution_path", evil.string()}}), InputError);
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_THROW(parse_scheduler_config("PointSolution", json::object()), InputError);
  EXPECT_THROW(parse_scheduler_config("Nonsense", json::object()), InputError);
  EXPECT_THROW(parse_scheduler_config("InVivoProfiling", {{"microbatches", 4}}), InputError);  // no p_blocking
  EXPECT_THROW(parse_scheduler_config("Frontier", {{"microbatchs", 4}}), InputError);          // typo
}

TEST(Service, TheScheduleBarrierWaitsForEveryRank) {
  ServiceOptions options = frontier_options();
  Service service(options);
  const std::string id = register_job(service, 3, 1, 1, {{"microbatches", 3}});
  register_ranks(service, id, 3, 1, 1, kFrequencies);
  std::vector<std::future<ApiResponse>> early;
  for (int r : {2, 0}) {
    early.push_back(std::async(std::launch::async, [&, r] {
      return call(service, "GET", "/schedule/" + id, "", {{"rank", std::to_string(r)}});
    }));
  }
  for (auto& f : early) EXPECT_EQ(f.wait_for(150ms), std::future_status::timeout) << "answered before rank 1 asked";
  EXPECT_EQ(job_entry(service, id).at("waiting_at_barrier"), 2);
  const ApiResponse last = call(service, "GET", "/schedule/" + id, "", {{"rank", "1"}});
  ASSERT_EQ(last.status, 200) << last.body;
  for (auto& f : early) {
    const ApiResponse answer = f.get();
    ASSERT_EQ(answer.status, 200) << answer.body;
    // No frontier yet: every instruction at the highest common clock.
    for (const auto& [name, mhz] : frequencies_of(answer)) EXPECT_EQ(mhz, 1410) << name;
  }
  EXPECT_EQ(frequencies_of(last).size(), 6u);  // 3 forwards and 3 backwards
}

// A rank that never got the answer of the round just released (a dropped connection, a
// server killed while answering) asks for it again by number and is answered at once, also
// by a restarted server; it does not join, and so desynchronise, the next round.
TEST(Service, ARoundCanBeAskedForAgainByNumber) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "rounds.db").string();
  options.barrier_timeout_s = 5.0;
  std::string id;
  const auto ask = [&](Service& service, int rank, int round) {
    return call(service, "GET", "/schedule/" + id, "", {{"rank", std::to_string(rank)}, {"round", std::to_string(round)}});
  };
  const auto both = [&](Service& service, int round) {
    auto other = std::async(std::launch::async, [&] { return ask(service, 1, round); });
    const ApiResponse mine = ask(service, 0, round);
    const ApiResponse theirs = other.get();
    EXPECT_EQ(mine.status, 200) << mine.body;
    EXPECT_EQ(theirs.status, 200) << theirs.body;
    return mine;
  };
  std::string released;
  {
    Service service(options);
    id = register_job(service, 2, 1, 1, {{"microbatches", 2}});
    register_ranks(service, id, 2, 1, 1, kFrequencies);
    both(service, 0);
    released = both(service, 1).body;
    // Rank 0 lost round 1's answer: asked again, it is answered without waiting for rank 1.
    const ApiResponse again = ask(service, 0, 1);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.body, released);
    EXPECT_EQ(job_entry(service, id).at("waiting_at_barrier"), 0);
    EXPECT_EQ(job_entry(service, id).at("rounds"), 2);
  }
  // A restarted server knows the job is at round 2, and still answers round 1 again.
  Service restarted(options);
  EXPECT_EQ(job_entry(restarted, id).at("rounds"), 2);
  const ApiResponse again = ask(restarted, 0, 1);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.body, released);
  both(restarted, 2);
  EXPECT_EQ(job_entry(restarted, id).at("rounds"), 3);
  // The cached answers are byte for byte the protocol's FrequencySchedule.
  EXPECT_EQ(released, frequency_schedule_json(0, frequencies_of(ask(restarted, 0, 2))).dump());
  EXPECT_EQ(call(restarted, "GET", "/schedule/" + id, "", {{"rank", "0"}, {"round", "x"}}).status, 422);
}

// In-vivo profiling keeps a clock until every rank has measured it for
// iterations_per_frequency iterations, however the results are split into posts.
TEST(Service, InVivoProfilingAccumulatesIterationsAcrossResults) {
  ServiceOptions options;
  options.scheduler = parse_scheduler_config(
      "InVivoProfiling", {{"p_blocking", 80.0}, {"microbatches", 2}, {"iterations_per_frequency", 3}});
  options.barrier_timeout_s = 20.0;
  Service service(options);
  const std::string id = register_job(service, 1, 2, 1);
  register_ranks(service, id, 1, 2, 1, {1410, 1350});
  const auto post = [&](int rank, double scale, int iterations) {
    json time = json::object(), energy = json::object();
    for (const char* name : {"forward", "backward"}) {
      time[name] = json::array();
      energy[name] = json::array();
      for (int i = 0; i < iterations; ++i) {
        time[name].push_back({0.1 * scale, 0.1 * scale});
        energy[name].push_back({20.0 * scale, 20.0 * scale});
      }
    }
    const json result = {{"rank", rank}, {"iter_time", std::vector<double>(iterations, 1.0)},
                         {"iter_energy", std::vector<double>(iterations, 50.0)},
                         {"time_breakdown", time}, {"energy_breakdown", energy}};
    ASSERT_EQ(call(service, "POST", "/result/" + id, result.dump()).status, 200);
  };
  // Round 0 at 1410: rank 0 reports 2 iterations, rank 1 reports 1: not enough yet.
  for (const ApiResponse& a : fetch_round(service, id, 2)) EXPECT_EQ(frequencies_of(a).front().second, 1410);
  post(0, 1.0, 2);
  post(1, 2.0, 1);
  for (const ApiResponse& a : fetch_round(service, id, 2)) EXPECT_EQ(frequencies_of(a).front().second, 1410);
  EXPECT_EQ(job_entry(service, id).at("profiling").at("done"), 0);
  post(0, 1.0, 1);  // rank 0 has 3 now, rank 1 still 1
  EXPECT_EQ(job_entry(service, id).at("profiling").at("done"), 0);
  post(1, 2.0, 2);  // both have 3: 1410 is measured
  EXPECT_EQ(job_entry(service, id).at("profiling").at("done"), 1);
  for (const ApiResponse& a : fetch_round(service, id, 2)) EXPECT_EQ(frequencies_of(a).front().second, 1350);
  post(0, 1.0, 3);
  post(1, 2.0, 3);
  ASSERT_TRUE(service.wait_until_idle(60s));
  const auto stored = service.store().load_all();
  const Profile measured = Profile::parse_csv(*stored.at(0).profile_csv, "stored");
  const OperationProfile* forward = measured.find(0, InstructionKind::kForward);
  ASSERT_NE(forward, nullptr);
  ASSERT_EQ(forward->measurements.size(), 2u);
  // Two replicas of the one stage: the slower one's time, the mean of their energy.
  EXPECT_NEAR(forward->measurements[0].time_s, 0.2, 1e-12);
  EXPECT_NEAR(forward->measurements[0].energy_j, 30.0, 1e-9);
}

// A forged or broken measurement is refused at the door: it once summed to infinity and
// failed the job's profile for good.
TEST(Service, ImplausibleMeasurementsAreRefusedAndProfilingGoesOn) {
  ServiceOptions options;
  options.scheduler = parse_scheduler_config(
      "InVivoProfiling", {{"p_blocking", 80.0}, {"microbatches", 1}, {"iterations_per_frequency", 1}});
  options.barrier_timeout_s = 20.0;
  Service service(options);
  const std::string id = register_job(service, 1, 1, 1);
  register_ranks(service, id, 1, 1, 1, {1410, 1350});
  const auto result = [](double time, double energy) {
    return json({{"rank", 0},
                 {"iter_time", {time}},
                 {"iter_energy", {energy}},
                 {"time_breakdown", {{"forward", {{time / 3}}}, {"backward", {{time / 2}}}}},
                 {"energy_breakdown", {{"forward", {{energy / 3}}}, {"backward", {{energy / 2}}}}}})
        .dump();
  };
  for (int clock = 0; clock < 2; ++clock) {
    for (const ApiResponse& a : fetch_round(service, id, 1)) ASSERT_EQ(a.status, 200) << a.body;
    const ApiResponse huge = call(service, "POST", "/result/" + id, result(1.0, 1e308));
    EXPECT_EQ(huge.status, 422);
    EXPECT_EQ(body_of(huge).at("detail"),
              "ProfilingResult.iter_energy[0]: 1e+308 J is beyond any plausible measurement: at most 1e+09 J");
    EXPECT_EQ(call(service, "POST", "/result/" + id, result(-1.0, 100.0)).status, 422);
    EXPECT_EQ(call(service, "POST", "/result/" + id, result(1e6, 100.0)).status, 422);
    ASSERT_EQ(call(service, "POST", "/result/" + id, result(1.0 + clock * 0.1, 300.0 - clock)).status, 200);
  }
  ASSERT_TRUE(service.wait_until_idle(60s));
  const json job = job_entry(service, id);
  EXPECT_EQ(job.at("phase"), "frontier") << job.dump();
  EXPECT_EQ(job.at("error"), "");
}

TEST(Service, ABarrierThatTimesOutNamesTheMissingRanks) {
  ServiceOptions options = frontier_options();
  options.barrier_timeout_s = 0.2;
  Service service(options);
  const std::string id = register_job(service, 2, 2, 1, {{"microbatches", 2}});
  register_ranks(service, id, 2, 2, 1, kFrequencies);
  const ApiResponse answer = call(service, "GET", "/schedule/" + id, "", {{"rank", "2"}});
  EXPECT_EQ(answer.status, 408);
  const std::string detail = body_of(answer).at("detail");
  EXPECT_NE(detail.find("3 rank(s)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("(0, 1, 3)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("ask again"), std::string::npos) << detail;
  // The rank that gave up is no longer counted (zeus's server never gives up on a rank): the
  // others are not released without it, and it rejoins by asking again.
  std::vector<std::future<ApiResponse>> others;
  for (int r : {0, 1, 3}) {
    others.push_back(std::async(std::launch::async, [&, r] {
      return call(service, "GET", "/schedule/" + id, "", {{"rank", std::to_string(r)}});
    }));
  }
  std::this_thread::sleep_for(100ms);
  for (auto& other : others) EXPECT_EQ(other.wait_for(0ms), std::future_status::timeout);
  const ApiResponse again = call(service, "GET", "/schedule/" + id, "", {{"rank", "2"}});
  EXPECT_EQ(again.status, 200) << again.body;
  for (auto& other : others) EXPECT_EQ(other.get().status, 200);
}

TEST(Service, WithoutABarrierTimeoutARankWaitsAsLongAsItTakes) {
  ServiceOptions options = frontier_options();
  options.barrier_timeout_s = 0;  // the default, as zeus's server
  Service service(options);
  const std::string id = register_job(service, 1, 2, 1, {{"microbatches", 2}});
  register_ranks(service, id, 1, 2, 1, kFrequencies);
  auto first = std::async(std::launch::async, [&] { return call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}}); });
  EXPECT_EQ(first.wait_for(700ms), std::future_status::timeout);
  EXPECT_EQ(call(service, "GET", "/schedule/" + id, "", {{"rank", "1"}}).status, 200);
  EXPECT_EQ(first.get().status, 200);
}

TEST(Service, WithoutAKnownLayoutARoundSaysHowToGiveOne) {
  Service service(frontier_options());
  const std::string id = register_job(service, 1, 1, 1);
  register_ranks(service, id, 1, 1, 1, kFrequencies);
  const ApiResponse answer = call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}});
  EXPECT_EQ(answer.status, 409);
  EXPECT_NE(answer.body.find("microbatches"), std::string::npos);
}

TEST(Service, BadRequestsGetA4xxNamingTheProblemAndChangeNothing) {
  Service service(frontier_options());
  const std::string id = register_job(service, 2, 1, 1, {{"microbatches", 2}});
  register_ranks(service, id, 2, 1, 1, kFrequencies);
  struct Case {
    std::string method, path, body;
    std::map<std::string, std::string> query;
    int status;
    std::string detail;
  };
  const json rank0 = {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", {1410}}};
  json rank9 = rank0;
  rank9["rank"] = 9;
  json pp5 = rank0;
  pp5["rank"] = 1;
  pp5["pp_rank"] = 5;
  const std::vector<Case> cases = {
      {"POST", "/register_job", "{not json", {}, 400, "not valid JSON"},
      {"POST", "/register_job", R"({"job_id": "", "pp_degree": "2"})", {}, 422, "JobInfo.pp_degree"},
      {"POST", "/register_job", testing::job_info(2, 2, 1, {{"world_size", 5}}).dump(), {}, 422, "world_size = 5"},
      {"POST", "/register_rank/nope", rank0.dump(), {}, 404, "unknown job id 'nope'"},
      {"POST", "/register_rank/" + id, rank0.dump(), {}, 409, "already registered"},
      {"POST", "/register_rank/" + id, rank9.dump(), {}, 422, "RankInfo.rank: 9 is out of range"},
      {"POST", "/register_rank/" + id, pp5.dump(), {}, 422, "RankInfo.pp_rank"},
      {"GET", "/schedule/" + id, "", {}, 422, "'rank': required"},
      {"GET", "/schedule/" + id, "", {{"rank", "one"}}, 422, "expected an integer"},
      {"GET", "/schedule/" + id, "", {{"rank", "2"}}, 422, "must be in [0, 1]"},
      {"GET", "/schedule/nope", "", {{"rank", "0"}}, 404, "unknown job id"},
      {"POST", "/result/" + id, R"({"rank": 7})", {}, 422, "out of range"},
      {"POST", "/result/" + id, R"({"rank": 0, "iter_time": "fast"})", {}, 422, "ProfilingResult.iter_time"},
      {"POST", "/profile/" + id, "stage,instruction\n0,forward\n", {{"p_blocking", "80"}}, 422, "frequency"},
      {"POST", "/profile/" + id, "x", {}, 422, "p_blocking"},
      {"POST", "/straggler", R"({"id": 0, "degree": 2})", {}, 409, "no frontier yet"},
      {"POST", "/straggler", R"({"id": 0, "degree": 0.5})", {}, 422, "Straggler.degree"},
      {"GET", "/register_job", "", {}, 405, "use POST"},
      {"DELETE", "/schedule/" + id, "", {}, 405, "use GET"},
      {"GET", "/nowhere", "", {}, 404, "no route"},
      // A job id may hold '/' (job_metadata is any string): the rest of the path is one.
      {"GET", "/schedule/" + id + "/extra", "", {{"rank", "0"}}, 404, "unknown job id '" + id + "/extra'"},
  };
  for (const Case& c : cases) {
    const ApiResponse response = call(service, c.method, c.path, c.body, c.query);
    EXPECT_EQ(response.status, c.status) << c.method << " " << c.path << " " << c.body << " -> " << response.body;
    const json body = body_of(response);
    ASSERT_TRUE(body.is_object() && body.contains("detail")) << response.body;
    EXPECT_NE(body.at("detail").get<std::string>().find(c.detail), std::string::npos)
        << c.method << " " << c.path << ": " << body.at("detail");
  }
  EXPECT_EQ(service.job_count(), 1u);
  EXPECT_EQ(service.store().count_jobs(), 1u);
  EXPECT_EQ(service.store().count_ranks(), 2u);
  EXPECT_EQ(job_entry(service, id).at("phase"), "waiting");
  EXPECT_EQ(service.store().check_consistency(), "ok");
  // And the job still works.
  for (const ApiResponse& r : fetch_round(service, id, 2)) EXPECT_EQ(r.status, 200) << r.body;
}

TEST(Service, TokenGuardsStateChangesAndOnlyThem) {
  ServiceOptions options = frontier_options();
  options.token = "s3cret";
  Service service(options);
  const std::string body = testing::job_info(1, 1, 1, {{"microbatches", 1}}).dump();
  for (const std::string& auth : {std::string(), std::string("Bearer wrong"), std::string("s3cret"),
                                  std::string("Bearer s3cre"), std::string("Basic czNjcmV0")}) {
    const ApiResponse refused = call(service, "POST", "/register_job", body, {}, auth);
    EXPECT_EQ(refused.status, 401) << auth;
  }
  EXPECT_EQ(service.job_count(), 0u);
  EXPECT_EQ(service.store().count_jobs(), 0u);
  const ApiResponse ok = call(service, "POST", "/register_job", body, {}, "Bearer s3cret");
  ASSERT_EQ(ok.status, 200) << ok.body;
  const std::string id = body_of(ok);
  const json rank = {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", {1410}}};
  EXPECT_EQ(call(service, "POST", "/register_rank/" + id, rank.dump()).status, 401);
  EXPECT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0})").status, 401);
  EXPECT_EQ(call(service, "POST", "/profile/" + id, "x", {{"p_blocking", "80"}}).status, 401);
  EXPECT_EQ(call(service, "POST", "/straggler", R"({"id": 0, "degree": 2})").status, 401);
  EXPECT_EQ(service.store().count_ranks(), 0u);
  // Reading needs no token.
  EXPECT_EQ(call(service, "GET", "/info").status, 200);
  EXPECT_EQ(call(service, "GET", "/healthz").status, 200);
  EXPECT_EQ(call(service, "GET", "/api/jobs").status, 200);
  EXPECT_EQ(call(service, "GET", "/metrics").status, 200);
  EXPECT_EQ(call(service, "GET", "/").status, 200);
  EXPECT_EQ(call(service, "POST", "/register_rank/" + id, rank.dump(), {}, "Bearer s3cret").status, 200);
  // GET /schedule moves the barrier and the persisted round count: it needs the token too.
  // (Without it, one request with round=2000000001 set the job's round count.)
  const ApiResponse anonymous = call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}, {"round", "2000000001"}});
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  EXPECT_EQ(job_entry(service, id).at("rounds"), 0);
  EXPECT_EQ(service.store().load_all().at(0).state.value("round", -1), 0);
  EXPECT_EQ(call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}}, "Bearer s3cret").status, 200);
  EXPECT_EQ(job_entry(service, id).at("rounds"), 1);
  EXPECT_EQ(body_of(call(service, "GET", "/info")).at("token_required_for"),
            json::array({"/register_job", "/register_rank", "/schedule", "/result", "/profile", "/straggler"}));
}

TEST(Service, StragglerOnlyScopeLeavesTheExistingProtocolOpen) {
  ServiceOptions options = frontier_options();
  options.token = "s3cret";
  options.token_scope = TokenScope::kStragglerOnly;
  Service service(options);
  const std::string id = register_job(service, 1, 1, 1, {{"microbatches", 1}});  // no token needed
  EXPECT_EQ(call(service, "POST", "/straggler", R"({"id": 0, "degree": 2})").status, 401);
  // With the token it gets past authentication (and fails for want of a frontier).
  EXPECT_EQ(call(service, "POST", "/straggler", R"({"id": 0, "degree": 2})", {}, "Bearer s3cret").status, 409);
  // Job ids are what the open routes need: the routes that list them want the token.
  for (const char* listing : {"/info", "/api/jobs", "/"}) EXPECT_EQ(call(service, "GET", listing).status, 401) << listing;
  EXPECT_EQ(call(service, "GET", "/healthz").status, 200);
  EXPECT_EQ(body_of(call(service, "GET", "/info", "", {}, "Bearer s3cret")).at("token_required_for"),
            json::array({"/straggler", "/", "/api/jobs", "/info"}));
  register_ranks(service, id, 1, 1, 1, {1410});
  EXPECT_EQ(call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}}).status, 200);
}

TEST(Service, IdleJobsExpire) {
  std::atomic<double> clock{1000.0};
  ServiceOptions options = frontier_options();
  options.clock = [&] { return clock.load(); };
  options.max_job_idle_s = 100.0;
  options.housekeeping_interval_s = 3600.0;  // the test drives expiry itself
  Service service(options);
  const std::string old_job = register_job(service, 1, 1, 1, {{"microbatches", 1}});
  clock = 1050.0;
  const std::string new_job = register_job(service, 1, 1, 1, {{"microbatches", 1}, {"job_metadata", "b"}});
  clock = 1090.0;
  register_ranks(service, old_job, 1, 1, 1, kFrequencies);  // activity at 1090
  clock = 1160.0;
  EXPECT_EQ(service.expire_idle_jobs(), 1u);  // new_job idle 110 s; old_job 70 s
  EXPECT_EQ(call(service, "GET", "/schedule/" + new_job, "", {{"rank", "0"}}).status, 404);
  EXPECT_EQ(call(service, "GET", "/schedule/" + old_job, "", {{"rank", "0"}}).status, 200);  // activity at 1160
  clock = 1259.0;
  EXPECT_EQ(service.expire_idle_jobs(), 0u);
  clock = 1261.0;
  EXPECT_EQ(service.expire_idle_jobs(), 1u);
  EXPECT_EQ(service.job_count(), 0u);
  EXPECT_EQ(service.store().count_jobs(), 0u);
  EXPECT_EQ(service.store().count_ranks(), 0u);
}

TEST(Service, RegistrationsInTheSameSecondGetDistinctIds) {
  ServiceOptions options = frontier_options();
  options.clock = [] { return 1709622489.25; };
  Service service(options);
  const std::string a = register_job(service, 1, 1, 1);
  const std::string b = register_job(service, 1, 1, 1);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(19), b.substr(19));  // same suffix, next second
}

// ---- profiles, frontiers, stragglers ----

class FrontierJob : public ::testing::Test {
 protected:
  static constexpr int kPp = 2, kDp = 2, kMicrobatches = 4;
  FrontierJob() : profile_(perseus::testing::synthetic_profile(kPp, 6, 7)) {}

  void SetUp() override {
    options_ = frontier_options();
    options_.clock = [this] { return clock_.load(); };
    service_ = std::make_unique<Service>(options_);
    id_ = register_job(*service_, kPp, kDp, 1);
    register_ranks(*service_, id_, kPp, kDp, 1, kFrequencies);
    upload(*service_, id_, profile_to_csv(profile_), kMicrobatches);
    ASSERT_TRUE(service_->wait_until_idle(60s));
    ASSERT_EQ(job_entry(*service_, id_).at("phase"), "frontier") << job_entry(*service_, id_).dump();
  }

  // Every rank's schedule of one round, checked against `expected` per pipeline.
  void expect_round(const PipelineFrequencies& pipeline0, const PipelineFrequencies& pipeline1) {
    const auto answers = fetch_round(*service_, id_, kPp * kDp);
    for (int d = 0; d < kDp; ++d) {
      for (int p = 0; p < kPp; ++p) {
        const ApiResponse& answer = answers[rank_of(kPp, 1, d, p, 0)];
        ASSERT_EQ(answer.status, 200) << answer.body;
        EXPECT_EQ(frequencies_of(answer), (d == 0 ? pipeline0 : pipeline1)[p]) << "dp " << d << " pp " << p;
      }
    }
  }

  std::atomic<double> clock_{5000.0};
  Profile profile_;
  ServiceOptions options_;
  std::unique_ptr<Service> service_;
  std::string id_;
};

TEST_F(FrontierJob, ServesTheTMinPlanOfTheFrontier) {
  const Expected expected = expected_frontier(profile_, kPp, kMicrobatches, 80.0);
  const json job = job_entry(*service_, id_);
  EXPECT_EQ(job.at("frontier").at("size"), expected.frontier.points.size());
  EXPECT_DOUBLE_EQ(job.at("frontier").at("t_min_s").get<double>(), expected.times.front());
  EXPECT_DOUBLE_EQ(job.at("frontier").at("t_star_s").get<double>(), expected.times.back());
  EXPECT_EQ(job.at("frontier").at("current_index"), 0);
  expect_round(expected.plan(0), expected.plan(0));
  EXPECT_EQ(service_->metrics().frontier_computations(true), 1u);
  // The timeline the page draws is the plan's: each stage's last instruction ends by T_min.
  double makespan = 0;
  for (const auto& stage : job.at("plan").at("stages")) makespan = std::max(makespan, stage.back().at(3).get<double>());
  EXPECT_NEAR(makespan, expected.times.front(), 1e-9);
}

TEST_F(FrontierJob, AStragglerMovesTheOtherPipelinesToTOpt) {
  const Expected expected = expected_frontier(profile_, kPp, kMicrobatches, 80.0);
  const double t_min = expected.times.front(), t_star = expected.times.back();
  ASSERT_GT(expected.times.size(), 3u);
  // A degree that lands T' between T_min and T*.
  const double degree = 1.0 + 0.5 * (t_star - t_min) / t_min;
  const int straggler = rank_of(kPp, 1, 1, 0, 0);  // pipeline 1
  const ApiResponse answer = call(*service_, "POST", "/straggler",
                                  json({{"job_id", id_}, {"id", straggler}, {"delay_s", 0}, {"degree", degree}}).dump());
  ASSERT_EQ(answer.status, 200) << answer.body;
  const json decision = body_of(answer);
  const double t_prime = degree * t_min;
  EXPECT_NEAR(decision.at("t_prime_s").get<double>(), t_prime, 1e-12);
  EXPECT_NEAR(decision.at("t_opt_s").get<double>(), std::min(t_star, t_prime), 1e-12);
  EXPECT_EQ(decision.at("pipeline"), 1);
  EXPECT_GE(decision.at("replan_seconds").get<double>(), 0.0);
  // The slowest plan that still fits T_opt, found independently by a linear scan.
  std::size_t index = 0;
  for (std::size_t i = 0; i < expected.times.size(); ++i) {
    if (expected.times[i] <= std::min(t_star, t_prime) + 1e-9) index = i;
  }
  ASSERT_GT(index, 0u);
  EXPECT_EQ(decision.at("frontier_index"), index);
  EXPECT_LE(decision.at("plan_time_s").get<double>(), t_prime + 1e-9);
  EXPECT_LT(decision.at("plan_energy_j").get<double>(), expected.frontier.points[0].measured.energy_j);
  // Pipeline 0 slows to the T_opt plan; the straggler's own pipeline keeps T_min.
  expect_round(expected.plan(index), expected.plan(0));
  EXPECT_EQ(service_->metrics().straggler_replan().count(), 1u);

  // A very slow straggler: T_opt = T*.
  ASSERT_EQ(call(*service_, "POST", "/straggler", json({{"id", straggler}, {"degree", 100.0}}).dump()).status, 200);
  expect_round(expected.plan(expected.times.size() - 1), expected.plan(0));

  // Recovery announced 30 s ahead: nothing changes until then.
  const json recovered = body_of(call(*service_, "POST", "/straggler",
                                      json({{"id", straggler}, {"delay_s", 30.0}, {"degree", 1.0}}).dump()));
  EXPECT_EQ(recovered.at("frontier_index"), 0);
  expect_round(expected.plan(expected.times.size() - 1), expected.plan(0));
  clock_ = clock_ + 31.0;
  expect_round(expected.plan(0), expected.plan(0));
  EXPECT_EQ(job_entry(*service_, id_).at("frontier").at("current_index"), 0);
}

TEST_F(FrontierJob, ABadProfileIsRefusedAndTheFrontierStays) {
  const std::string before = job_entry(*service_, id_).at("frontier").dump();
  // Three stages for a two-stage pipeline.
  const ApiResponse three = call(*service_, "POST", "/profile/" + id_,
                                 profile_to_csv(perseus::testing::synthetic_profile(3, 6, 1)),
                                 {{"p_blocking", "80"}, {"microbatches", "4"}});
  EXPECT_EQ(three.status, 422);
  EXPECT_NE(three.body.find("3 stages"), std::string::npos) << three.body;
  const ApiResponse negative =
      call(*service_, "POST", "/profile/" + id_, "stage,instruction,frequency,time,energy\n0,forward,1410,-1,3\n",
           {{"p_blocking", "80"}, {"microbatches", "4"}});
  EXPECT_EQ(negative.status, 422);
  EXPECT_NE(negative.body.find(":2"), std::string::npos) << negative.body;  // names the line
  const ApiResponse binary = call(*service_, "POST", "/profile/" + id_, std::string("\x89PNG\r\n\x1a\n\0\0", 10),
                                  {{"p_blocking", "80"}, {"microbatches", "4"}});
  EXPECT_EQ(binary.status, 422);
  EXPECT_EQ(call(*service_, "POST", "/profile/" + id_, "x", {{"p_blocking", "nan"}}).status, 422);
  EXPECT_EQ(call(*service_, "POST", "/profile/" + id_, "x", {{"p_blocking", "80"}, {"microbatches", "0"}}).status, 422);
  EXPECT_EQ(job_entry(*service_, id_).at("phase"), "frontier");
  EXPECT_EQ(job_entry(*service_, id_).at("frontier").dump(), before);
}

TEST_F(FrontierJob, MetricsAndInfoDescribeTheServer) {
  const std::string metrics = call(*service_, "GET", "/metrics").body;
  EXPECT_NE(metrics.find("perseus_jobs 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("perseus_ranks 4\n"), std::string::npos);
  EXPECT_NE(metrics.find("perseus_http_requests_total{route=\"/register_rank/{job_id}\",status=\"200\"} 4"),
            std::string::npos);
  EXPECT_NE(metrics.find("perseus_http_requests_total{route=\"/profile/{job_id}\",status=\"202\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("perseus_frontier_computations_total{outcome=\"ok\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("perseus_http_request_duration_seconds_bucket{route=\"/register_job\",le=\"+Inf\"} 1"),
            std::string::npos);
  EXPECT_EQ(call(*service_, "GET", "/metrics").content_type.rfind("text/plain; version=0.0.4", 0), 0u);
  const json info = body_of(call(*service_, "GET", "/info"));
  EXPECT_EQ(info.at("scheduler"), "Frontier");
  EXPECT_EQ(info.at("ranks"), 4);
  EXPECT_EQ(info.at("jobs").at(0).at("phase"), "frontier");
  const std::string page = call(*service_, "GET", "/").body;
  EXPECT_NE(page.find("<script id=\"initial-data\""), std::string::npos);  // drawn by script: web_page_test
  EXPECT_NE(page.find(id_), std::string::npos);
}

TEST_F(FrontierJob, ARestartedServiceServesTheSamePlans) {
  TempDir dir;
  ServiceOptions options = options_;
  options.db_path = (dir.path() / "server.db").string();
  const Expected expected = expected_frontier(profile_, kPp, kMicrobatches, 80.0);
  std::string id;
  PipelineFrequencies served0, served1;
  {
    Service first(options);
    id = register_job(first, kPp, kDp, 1);
    register_ranks(first, id, kPp, kDp, 1, kFrequencies);
    upload(first, id, profile_to_csv(profile_), kMicrobatches);
    ASSERT_TRUE(first.wait_until_idle(60s));
    const double degree = 1.0 + 0.3 * (expected.times.back() - expected.times.front()) / expected.times.front();
    ASSERT_EQ(call(first, "POST", "/straggler",
                   json({{"job_id", id}, {"id", rank_of(kPp, 1, 0, 1, 0)}, {"degree", degree}}).dump())
                  .status,
              200);
    for (const ApiResponse& r : fetch_round(first, id, kPp * kDp)) ASSERT_EQ(r.status, 200) << r.body;
    const auto answers = fetch_round(first, id, kPp * kDp);
    for (int p = 0; p < kPp; ++p) {
      served0.push_back(frequencies_of(answers[rank_of(kPp, 1, 0, p, 0)]));
      served1.push_back(frequencies_of(answers[rank_of(kPp, 1, 1, p, 0)]));
    }
    EXPECT_NE(served0, served1);  // pipeline 0 straggles and keeps T_min; pipeline 1 slowed down
  }
  Service second(options);
  const json job = job_entry(second, id);
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job.at("phase"), "frontier");
  EXPECT_EQ(job.at("ranks_registered"), 4);
  EXPECT_EQ(job.at("stragglers").size(), 1u);
  const auto answers = fetch_round(second, id, kPp * kDp);
  for (int p = 0; p < kPp; ++p) {
    EXPECT_EQ(frequencies_of(answers[rank_of(kPp, 1, 0, p, 0)]), served0[p]);
    EXPECT_EQ(frequencies_of(answers[rank_of(kPp, 1, 1, p, 0)]), served1[p]);
  }
  EXPECT_EQ(served0, expected.plan(0));
  EXPECT_EQ(second.metrics().frontier_computations(true), 0u);  // restored, not recomputed
  EXPECT_EQ(second.store().check_consistency(), "ok");
}

TEST(Service, AComputationCutShortByAStopResumesAfterRestart) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "server.db").string();
  const Profile profile = perseus::testing::synthetic_profile(2, 6, 11);
  std::string id;
  {
    Service first(options);
    id = register_job(first, 2, 1, 1);
    register_ranks(first, id, 2, 1, 1, kFrequencies);
    upload(first, id, profile_to_csv(profile), 4);
    first.shutdown();  // the computation may or may not have finished; either must recover
  }
  Service second(options);
  ASSERT_TRUE(second.wait_until_idle(60s));
  EXPECT_EQ(job_entry(second, id).at("phase"), "frontier");
  const Expected expected = expected_frontier(profile, 2, 4, 80.0);
  const auto answers = fetch_round(second, id, 2);
  EXPECT_EQ(frequencies_of(answers[0]), expected.plan(0)[0]);
  EXPECT_EQ(frequencies_of(answers[1]), expected.plan(0)[1]);
}

// ---- failures are final, and crashes are not retried forever ----

StoredJob stored_job(Service& service, const std::string& id) {
  for (StoredJob& job : service.store().load_all()) {
    if (job.job_id == id) return std::move(job);
  }
  ADD_FAILURE() << "job " << id << " is not in the database";
  return {};
}

// A crawl step of 2 us: 8 stages, M = 12 take seconds (1.5 s on the development machine),
// long enough to be stopped midway.
constexpr const char* kSlowUnitTime = "0.000002";

TEST(Service, AStopMidComputationIsNotCountedAsAFailedAttempt) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "server.db").string();
  std::string id;
  for (int start = 0; start < 3; ++start) {
    Service service(options);
    if (start == 0) {
      id = register_job(service, 8, 1, 1);
      register_ranks(service, id, 8, 1, 1, kFrequencies);
      const ApiResponse uploaded =
          call(service, "POST", "/profile/" + id, profile_to_csv(perseus::testing::synthetic_profile(8, 6, 21)),
               {{"p_blocking", "80"}, {"unit_time", kSlowUnitTime}, {"microbatches", "12"}});
      ASSERT_EQ(uploaded.status, 202) << uploaded.body;
    }
    // The attempt is counted (and persisted) before the computation starts...
    for (int i = 0; i < 2000 && stored_job(service, id).state.value("compute_attempts", 0) == 0; ++i) {
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(stored_job(service, id).state.value("compute_attempts", 0), 1) << "start " << start;
    service.shutdown();
    // ...and given back when a stop cuts it short: three stops, and the job still computes.
    const StoredJob stored = stored_job(service, id);
    EXPECT_EQ(stored.state.value("compute_attempts", -1), 0) << "start " << start;
    EXPECT_EQ(stored.state.value("phase", ""), "computing") << "start " << start;
    EXPECT_EQ(service.metrics().frontier_computations(false), 0u);
  }
}

TEST(Service, AComputationThatThrowsFailsTheJobForGoodAcrossRestarts) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "server.db").string();
  const std::string good_csv = profile_to_csv(perseus::testing::synthetic_profile(2, 6, 3));
  std::string id;
  {
    Service first(options);
    id = register_job(first, 2, 1, 1);
    register_ranks(first, id, 2, 1, 1, kFrequencies);
    upload(first, id, good_csv, 4);
    ASSERT_TRUE(first.wait_until_idle(60s));
    // A job left computing by a stop, with a profile its computation cannot read (one an
    // older server accepted, say): the computation throws.
    const StoredJob job = stored_job(first, id);
    json state = job.state;
    state["phase"] = "computing";
    first.store().save_profile(id, "stage,instruction,frequency,time,energy\n0,forward,1410,-1,1\n",
                               job.profile_params, state);
  }
  std::string error;
  {
    Service second(options);
    ASSERT_TRUE(second.wait_until_idle(60s));
    const json job = job_entry(second, id);
    EXPECT_EQ(job.at("phase"), "failed");
    error = job.at("error").get<std::string>();
    EXPECT_EQ(error.rfind("frontier computation failed: ", 0), 0u) << error;
    EXPECT_EQ(second.metrics().frontier_computations(false), 1u);
    EXPECT_EQ(stored_job(second, id).state.value("phase", ""), "failed");  // persisted
    // The ranks run on at the highest clock.
    for (const ApiResponse& answer : fetch_round(second, id, 2)) {
      ASSERT_EQ(answer.status, 200) << answer.body;
      for (const auto& [name, mhz] : frequencies_of(answer)) EXPECT_EQ(mhz, 1410);
    }
  }
  {
    Service third(options);
    ASSERT_TRUE(third.wait_until_idle(60s));
    const json job = job_entry(third, id);
    EXPECT_EQ(job.at("phase"), "failed");
    EXPECT_EQ(job.at("error"), error);
    EXPECT_EQ(third.metrics().frontier_computations(false) + third.metrics().frontier_computations(true), 0u);
    // A new profile is a new start.
    upload(third, id, good_csv, 4);
    ASSERT_TRUE(third.wait_until_idle(60s));
    EXPECT_EQ(job_entry(third, id).at("phase"), "frontier");
    EXPECT_EQ(job_entry(third, id).at("error"), "");
  }
}

TEST(Service, AComputationStartedTwiceWithoutFinishingIsNotStartedAgain) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "server.db").string();
  std::string id;
  // The state a server killed mid-computation leaves: phase computing, `attempts` started.
  const auto crashed = [&](int attempts) {
    Service service(options);
    const StoredJob job = stored_job(service, id);
    json state = job.state;
    state["phase"] = "computing";
    state["compute_attempts"] = attempts;
    service.store().save_profile(id, *job.profile_csv, job.profile_params, state);
    service.shutdown();
  };
  {
    Service first(options);
    id = register_job(first, 2, 1, 1);
    register_ranks(first, id, 2, 1, 1, kFrequencies);
    upload(first, id, profile_to_csv(perseus::testing::synthetic_profile(2, 6, 5)), 4);
    ASSERT_TRUE(first.wait_until_idle(60s));
    ASSERT_EQ(stored_job(first, id).state.value("compute_attempts", -1), 0);
  }
  crashed(1);  // one crash: the next start tries again, and this time it finishes
  {
    Service second(options);
    ASSERT_TRUE(second.wait_until_idle(60s));
    EXPECT_EQ(job_entry(second, id).at("phase"), "frontier");
    EXPECT_EQ(second.metrics().frontier_computations(true), 1u);
    EXPECT_EQ(stored_job(second, id).state.value("compute_attempts", -1), 0);
  }
  crashed(2);  // two: the computation is what takes the server down
  for (int start = 0; start < 2; ++start) {
    Service service(options);
    ASSERT_TRUE(service.wait_until_idle(60s));
    const json job = job_entry(service, id);
    EXPECT_EQ(job.at("phase"), "failed");
    EXPECT_EQ(job.at("error"), "frontier computation did not finish in 2 attempts (crashed?)");
    EXPECT_EQ(service.metrics().frontier_computations(false) + service.metrics().frontier_computations(true), 0u);
    EXPECT_EQ(stored_job(service, id).state.value("phase", ""), "failed");
  }
}

TEST(Service, ASecondServiceOnTheSameDatabaseRefusesToStart) {
  TempDir dir;
  ServiceOptions options = frontier_options();
  options.db_path = (dir.path() / "server.db").string();
  auto first = std::make_unique<Service>(options);
  const std::string id = register_job(*first, 1, 1, 1);
  try {
    Service second(options);
    FAIL() << "a second service opened a database in use";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), options.db_path + " is in use by another perseus server (pid " +
                                         std::to_string(::getpid()) + "); stop it, or give this one another --db");
  }
  // Another name of the same file is the same database.
  std::filesystem::create_symlink(options.db_path, dir.path() / "alias.db");
  ServiceOptions alias = options;
  alias.db_path = (dir.path() / "alias.db").string();
  EXPECT_THROW(Service{alias}, InputError);
  // The first is untouched and serves on; once it stops, a new one starts and has its job.
  EXPECT_EQ(first->job_count(), 1u);
  EXPECT_EQ(call(*first, "GET", "/healthz").status, 200);
  first.reset();
  Service third(options);
  EXPECT_EQ(third.job_count(), 1u);
  EXPECT_FALSE(job_entry(third, id).is_null());
  // ":memory:" databases are each their own.
  Service memory_a(frontier_options()), memory_b(frontier_options());
}

// One logfmt line as key/value pairs; a key without '=' or an unterminated quote is an error.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_logfmt(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t eq = line.find('=', i);
    const std::size_t space = line.find(' ', i);
    if (eq == std::string::npos || (space != std::string::npos && space < eq)) return std::nullopt;
    std::string key = line.substr(i, eq - i), value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) return std::nullopt;
        if (line[i] == '"') break;
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value += line[i];
      }
      ++i;
    } else {
      const std::size_t end = std::min(line.find(' ', i), line.size());
      value = line.substr(i, end - i);
      if (value.find('"') != std::string::npos) return std::nullopt;
      i = end;
    }
    fields.emplace_back(std::move(key), std::move(value));
  }
  return fields;
}

TEST(Service, UserInputCannotForgeLogFieldsOrLines) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");  // perseus serve's
  logger->set_level(spdlog::level::debug);
  ServiceOptions options = frontier_options();
  options.logger = logger;
  Service service(options);
  // Quotes, spaces and '=' are allowed in job_metadata, which becomes part of the job id.
  const std::string metadata = R"(x" level=error event=forged note="a b=c)";
  const std::string id = register_job(service, 1, 1, 1, {{"job_metadata", metadata}, {"microbatches", 1}});
  ASSERT_TRUE(id.ends_with("+" + metadata)) << id;
  register_ranks(service, id, 1, 1, 1, {1410});
  EXPECT_EQ(call(service, "GET", "/schedule/" + id, "", {{"rank", "0"}}).status, 200);
  // A path with a line break (httplib decodes %0A), echoed back in a 404's detail.
  EXPECT_EQ(call(service, "GET", "/schedule/nope\nts=0 level=error event=forged \"", "", {{"rank", "0"}}).status, 404);
  EXPECT_EQ(call(service, "POST", "/register_rank/" + id, "{\"rank\": \"\\\" event=forged\"}").status, 422);
  logger->flush();
  std::istringstream lines(out.str());
  std::string line;
  int register_lines = 0, count = 0;
  while (std::getline(lines, line)) {
    ++count;
    const auto fields = parse_logfmt(line);
    ASSERT_TRUE(fields) << line;
    std::map<std::string, int> keys;
    for (const auto& [key, value] : *fields) {
      ++keys[key];
      EXPECT_NE(value, "forged") << line;
      if (key == "job_id") {
        EXPECT_TRUE(value == id || value.find("nope") == 0) << line;
      }
    }
    EXPECT_EQ(fields->front().first, "ts") << line;
    EXPECT_EQ(keys["level"], 1) << line;
    EXPECT_EQ(keys["event"], 1) << line;
    if (line.find("event=register_job") != std::string::npos) {
      ++register_lines;
      std::vector<std::string> names;
      for (const auto& [key, value] : *fields) names.push_back(key);
      EXPECT_EQ(names, (std::vector<std::string>{"ts", "level", "event", "job_id", "world_size", "scheduler"})) << line;
    }
  }
  EXPECT_EQ(register_lines, 1);
  EXPECT_GE(count, 6);  // register_job, register_rank, deploy, and a request line each
}

// ---- in-vivo profiling ----

// What the ranks "measure": time grows as the clock drops, power falls faster.
double model_time(int stage, InstructionKind kind, int mhz) {
  const double base = (kind == InstructionKind::kForward ? 0.04 : 0.08) * (1.0 + 0.2 * stage);
  return base * (0.6 * 1410.0 / mhz + 0.4);
}
double model_energy(int stage, InstructionKind kind, int mhz) {
  return (60.0 + 250.0 * std::pow(mhz / 1410.0, 2.5)) * model_time(stage, kind, mhz);
}

TEST(Service, InVivoProfilingWalksTheClocksDownAndStopsWhenEnergyKeepsRising) {
  ServiceOptions options;
  options.scheduler = parse_scheduler_config("InVivoProfiling", {{"p_blocking", 80.0}, {"microbatches", 4}});
  options.barrier_timeout_s = 20.0;
  Service service(options);
  constexpr int kPp = 2, kDp = 2, kM = 4;
  std::vector<int> clocks;
  for (int k = 0; k < 14; ++k) clocks.push_back(1410 - 45 * k);
  const std::string id = register_job(service, kPp, kDp, 1);
  EXPECT_TRUE(register_job(service, 1, 1, 1, {{"job_metadata", "x"}}).ends_with("+dp1+pp1+tp1+InVivoProfiling+x"));
  register_ranks(service, id, kPp, kDp, 1, clocks);
  // The job's iteration energy per clock: falls for 4 clocks, then rises 6 times in a row.
  const auto iteration_energy = [](int k) { return k <= 3 ? 1000.0 - 10.0 * k : 970.0 + 5.0 * (k - 3); };
  int rounds = 0;
  while (job_entry(service, id).at("phase") == "profiling") {
    ASSERT_LT(rounds, 14);
    const int mhz = clocks[static_cast<std::size_t>(rounds)];
    for (const ApiResponse& answer : fetch_round(service, id, kPp * kDp)) {
      ASSERT_EQ(answer.status, 200) << answer.body;
      for (const auto& [name, f] : frequencies_of(answer)) ASSERT_EQ(f, mhz) << "round " << rounds << " " << name;
    }
    for (int d = 0; d < kDp; ++d) {
      for (int p = 0; p < kPp; ++p) {
        // Replica 1 is 10% slower and uses 10% less energy than replica 0.
        const double time_scale = d == 1 ? 1.1 : 1.0, energy_scale = d == 1 ? 0.9 : 1.0;
        json time = json::object(), energy = json::object();
        for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
          const std::string name(to_string(kind));
          const std::vector<double> t(kM, model_time(p, kind, mhz) * time_scale);
          const std::vector<double> e(kM, model_energy(p, kind, mhz) * energy_scale);
          time[name] = {t, t};  // two iterations
          energy[name] = {e, e};
        }
        const json result = {{"rank", rank_of(kPp, 1, d, p, 0)},
                             {"iter_time", {1.0, 1.0}},
                             {"iter_energy", {iteration_energy(rounds) / 4, iteration_energy(rounds) / 4}},
                             {"time_breakdown", time},
                             {"energy_breakdown", energy}};
        ASSERT_EQ(call(service, "POST", "/result/" + id, result.dump()).status, 200);
      }
    }
    ++rounds;
  }
  EXPECT_EQ(rounds, 10);  // clocks 0..9: the rises at 4..9 are six in a row, more than five
  EXPECT_NE(job_entry(service, id).at("profiling_stop_reason").get<std::string>().find("rose 6 times"),
            std::string::npos);
  ASSERT_TRUE(service.wait_until_idle(60s));
  const json job = job_entry(service, id);
  ASSERT_EQ(job.at("phase"), "frontier") << job.dump();

  // The assembled profile: per stage the slowest replica's time and the replicas' mean energy
  // (one pipeline's: the frontier is a pipeline's, and every replica runs the same plan).
  const auto stored = service.store().load_all();
  const auto it = std::find_if(stored.begin(), stored.end(), [&](const StoredJob& j) { return j.job_id == id; });
  ASSERT_NE(it, stored.end());
  const Profile measured = Profile::parse_csv(*it->profile_csv, "stored");
  ASSERT_EQ(measured.num_stages(), kPp);
  for (int p = 0; p < kPp; ++p) {
    for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
      const OperationProfile* op = measured.find(p, kind);
      ASSERT_NE(op, nullptr);
      ASSERT_EQ(op->measurements.size(), 10u);
      for (const Measurement& m : op->measurements) {
        EXPECT_NEAR(m.time_s, 1.1 * model_time(p, kind, m.frequency_mhz), 1e-12);
        EXPECT_NEAR(m.energy_j, 0.95 * model_energy(p, kind, m.frequency_mhz), 1e-9);
      }
    }
  }
  // And the plans served are that profile's frontier.
  const Expected expected = expected_frontier(measured, kPp, kM, 80.0);
  const auto answers = fetch_round(service, id, kPp * kDp);
  for (int p = 0; p < kPp; ++p) EXPECT_EQ(frequencies_of(answers[rank_of(kPp, 1, 0, p, 0)]), expected.plan(0)[p]);
}

}  // namespace
}  // namespace perseus::server
