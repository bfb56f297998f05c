// The client library against a real server on loopback: registration, the hooks, the
// schedule checks, what it measures and reports, rounds, authentication, errors, retries.
#include "perseus/client/perseus_client.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/server/frontier_table.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/service.hpp"
#include "perseus/server/zeus_dump.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::client {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using server::HttpOptions;
using server::HttpServer;
using server::Service;
using server::ServiceOptions;
using perseus::server::testing::TempDir;

// A 2-stage PointSolution plan: stage 0 runs F F B B at 1410/1350/1290/1230, stage 1 F B F B.
const char* kPlan = R"([
[('forward', 1410), ('forward', 1350), ('backward', 1290), ('backward', 1230)],
[('forward', 1170), ('backward', 1110), ('forward', 1410), ('backward', 1350)],
]
)";

EmulatedGpuSpec six_clock_gpu() {
  return emulated_gpu_spec_from_profile(perseus::testing::synthetic_profile(2, 6, 11), 80.0);
}

class ClientFixture : public ::testing::Test {
 protected:
  void start(ServiceOptions options) {
    service_ = std::make_unique<Service>(std::move(options));
    HttpOptions http;
    http.port = 0;
    server_ = std::make_unique<HttpServer>(*service_, http);
    server_->start();
  }
  void start_point_solution(const std::string& token = "") {
    plan_path_ = dir_.write("freqs_pipeline_00001.py", kPlan);
    ServiceOptions options;
    options.scheduler = server::parse_scheduler_config("PointSolution", {{"solution_path", plan_path_.string()}});
    options.barrier_timeout_s = 20.0;
    options.token = token;
    options.dump_data = true;
    options.dump_dir = (dir_.path() / "dump").string();
    start(std::move(options));
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (service_) service_->shutdown();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  ClientOptions options_for(int rank, int pp_rank, const std::string& job_id = "") const {
    ClientOptions options;
    options.connection.url = url();
    options.connection.retry_for_s = 2.0;
    options.rank = rank;
    options.pp_rank = pp_rank;
    options.pp_degree = 2;
    options.world_size = 2;
    options.job_id = job_id;
    options.layout = PipelineLayout{ScheduleKind::k1F1B, 2, 1};
    return options;
  }

  // The results the server received, from its dump (zeus's N.prof.json, one per round every
  // rank reported for), in round order.
  std::vector<json> dumped_results(const std::string& job_id) const {
    std::vector<json> out;
    const std::filesystem::path folder = dir_.path() / "dump" / server::dump_folder_name(job_id);
    for (int round = 0; std::filesystem::exists(folder / (std::to_string(round) + ".prof.json")); ++round) {
      std::ifstream in(folder / (std::to_string(round) + ".prof.json"));
      for (json& result : json::parse(in)) out.push_back(std::move(result));
    }
    return out;
  }

  TempDir dir_;
  std::filesystem::path plan_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> server_;
};

// Runs one step of `names` on `gpu`, as an engine would.
void run_step(PerseusClient& client, EmulatedGpu& gpu, int stage, const std::vector<std::string>& names) {
  client.on_step_begin();
  for (const std::string& name : names) {
    client.on_instruction_begin(name);
    client.controller()->wait_idle();
    gpu.run(*parse_instruction_kind(name), stage);
    client.on_instruction_end(name);
  }
  client.on_step_end();
}

TEST_F(ClientFixture, RegistersRunsThePlanAndReportsWhatItMeasured) {
  start_point_solution();
  EmulatedGpu gpu0(six_clock_gpu()), gpu1(six_clock_gpu());
  ClientOptions o0 = options_for(0, 0);
  o0.clock = [&] { return gpu0.now_s(); };
  PerseusClient rank0(o0, gpu0);  // registers the job
  EXPECT_NE(rank0.job_id().find("+dp1+pp2+tp1+PointSolution"), std::string::npos) << rank0.job_id();
  ClientOptions o1 = options_for(1, 1, rank0.job_id());
  o1.clock = [&] { return gpu1.now_s(); };
  PerseusClient rank1(o1, gpu1);

  // The controller starts by resetting the power limit and locking memory at its maximum.
  ASSERT_GE(gpu0.events().size(), 2u);
  EXPECT_EQ(gpu0.events()[0].kind, EmulatedGpuEvent::Kind::kResetPowerLimit);
  EXPECT_EQ(gpu0.events()[1].kind, EmulatedGpuEvent::Kind::kLockMemory);

  // Both ranks take their step at once: the schedule is a barrier.
  auto other = std::async(std::launch::async, [&] { run_step(rank1, gpu1, 1, {"forward", "backward", "forward", "backward"}); });
  run_step(rank0, gpu0, 0, {"forward", "forward", "backward", "backward"});
  other.get();

  const StageFrequencies expected0 = {{"forward", 1410}, {"forward", 1350}, {"backward", 1290}, {"backward", 1230}};
  EXPECT_EQ(rank0.schedule(), expected0);
  std::vector<int> locked;
  for (const EmulatedGpuEvent& e : gpu0.events()) {
    if (e.kind == EmulatedGpuEvent::Kind::kLockGraphics) locked.push_back(e.max_mhz);
  }
  EXPECT_EQ(locked, (std::vector<int>{1410, 1350, 1290, 1230}));

  // The result the server got: every instruction's time and energy as the GPU measured them.
  const std::vector<json> results = dumped_results(rank0.job_id());
  ASSERT_EQ(results.size(), 2u);
  const json& r0 = results[0].at("rank") == 0 ? results[0] : results[1];
  const EmulatedGpuSpec spec = six_clock_gpu();
  const auto cost = [&](InstructionKind kind, int mhz) { return spec.costs.at({0, kind, mhz}); };
  const auto forward_times = r0.at("time_breakdown").at("forward").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(forward_times.size(), 1u);  // one iteration
  ASSERT_EQ(forward_times[0].size(), 2u);
  EXPECT_NEAR(forward_times[0][0], cost(InstructionKind::kForward, 1410).time_s, 1e-12);
  EXPECT_NEAR(forward_times[0][1], cost(InstructionKind::kForward, 1350).time_s, 1e-12);
  const auto backward_energy = r0.at("energy_breakdown").at("backward").get<std::vector<std::vector<double>>>();
  EXPECT_NEAR(backward_energy[0][1], cost(InstructionKind::kBackward, 1230).energy_j, 2e-3);  // mJ counter
  const double busy = cost(InstructionKind::kForward, 1410).time_s + cost(InstructionKind::kForward, 1350).time_s +
                      cost(InstructionKind::kBackward, 1290).time_s + cost(InstructionKind::kBackward, 1230).time_s;
  EXPECT_NEAR(r0.at("iter_time")[0].get<double>(), busy, 1e-9);
  EXPECT_NEAR(r0.at("iter_energy")[0].get<double>(), gpu0.energy_j(), 2e-3);

  const ClientStats stats = rank0.stats();
  EXPECT_EQ(stats.steps, 1u);
  EXPECT_EQ(stats.rounds, 1u);
  EXPECT_EQ(stats.results_posted, 1u);
  EXPECT_EQ(stats.instructions, 4u);

  // Closing resets the clocks.
  rank0.close();
  const auto events = gpu0.events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].kind, EmulatedGpuEvent::Kind::kResetGraphics);
  EXPECT_EQ(events.back().kind, EmulatedGpuEvent::Kind::kResetMemory);
}

TEST_F(ClientFixture, HooksThatDoNotMatchTheScheduleAreErrors) {
  start_point_solution();
  EmulatedGpu gpu0(six_clock_gpu()), gpu1(six_clock_gpu());
  ClientOptions o0 = options_for(0, 0);
  o0.steps_per_round = 0;  // fetch once, as the existing client
  PerseusClient rank0(o0, gpu0);
  ClientOptions o1 = options_for(1, 1, rank0.job_id());
  o1.steps_per_round = 0;
  PerseusClient rank1(o1, gpu1);

  EXPECT_THROW(rank0.on_instruction_begin("forward"), ClientError);  // no step yet
  EXPECT_THROW(rank0.on_step_end(), ClientError);
  auto other = std::async(std::launch::async, [&] { rank1.on_step_begin(); });
  rank0.on_step_begin();
  other.get();
  EXPECT_THROW(rank0.on_step_begin(), ClientError);  // twice
  try {
    rank0.on_instruction_begin("backward");
    FAIL() << "a backward where the schedule has a forward was accepted";
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("expects 'forward' at 1410 MHz"), std::string::npos) << e.what();
  }
  rank0.on_instruction_begin("forward");
  EXPECT_THROW(rank0.on_instruction_begin("forward"), ClientError);  // the first has not ended
  EXPECT_THROW(rank0.on_instruction_end("backward"), ClientError);
  rank0.on_instruction_end("forward");
  try {
    rank0.on_step_end();  // three instructions left
    FAIL() << "a step that ran 1 of 4 instructions ended without complaint";
  } catch (const ClientError& e) {
    EXPECT_NE(std::string(e.what()).find("ran 1 of the 4"), std::string::npos) << e.what();
  }
  // steps_per_round = 0: the next step reuses the schedule without asking (no barrier).
  rank0.on_step_begin();
  for (const auto& [name, mhz] : rank0.schedule()) {
    rank0.on_instruction_begin(name);
    rank0.on_instruction_end(name);
  }
  EXPECT_THROW(rank0.on_instruction_begin("forward"), ClientError);  // the schedule is used up
  rank0.on_step_end();
  EXPECT_EQ(rank0.stats().rounds, 1u);
  EXPECT_EQ(rank0.stats().results_posted, 0u);
  EXPECT_TRUE(dumped_results(rank0.job_id()).empty());
}

TEST_F(ClientFixture, ARoundOfSeveralStepsIsFetchedOnceAndReportedOnce) {
  start_point_solution();
  EmulatedGpu gpu0(six_clock_gpu()), gpu1(six_clock_gpu());
  ClientOptions o0 = options_for(0, 0);
  o0.steps_per_round = 3;
  o0.clock = [&] { return gpu0.now_s(); };
  PerseusClient rank0(o0, gpu0);
  ClientOptions o1 = options_for(1, 1, rank0.job_id());
  o1.steps_per_round = 3;
  o1.clock = [&] { return gpu1.now_s(); };
  PerseusClient rank1(o1, gpu1);
  auto other = std::async(std::launch::async, [&] {
    for (int i = 0; i < 6; ++i) run_step(rank1, gpu1, 1, {"forward", "backward", "forward", "backward"});
  });
  for (int i = 0; i < 6; ++i) run_step(rank0, gpu0, 0, {"forward", "forward", "backward", "backward"});
  other.get();
  EXPECT_EQ(rank0.stats().rounds, 2u);
  EXPECT_EQ(rank0.stats().results_posted, 2u);
  const std::vector<json> results = dumped_results(rank0.job_id());
  ASSERT_EQ(results.size(), 4u);
  for (const json& r : results) {
    EXPECT_EQ(r.at("iter_time").size(), 3u);
    EXPECT_EQ(r.at("iter_energy").size(), 3u);
    for (const auto& [name, iterations] : r.at("time_breakdown").items()) {
      ASSERT_EQ(iterations.size(), 3u) << name;
      for (const json& values : iterations) EXPECT_EQ(values.size(), 2u) << name;  // two of each per step
    }
  }
}

TEST_F(ClientFixture, TheTokenIsSentAndRefusalsCarryTheServersDetail) {
  start_point_solution("t0ken");
  EmulatedGpu gpu(six_clock_gpu());
  try {
    PerseusClient refused(options_for(0, 0), gpu);  // no token
    FAIL() << "registered without the token";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.status(), 401);
    EXPECT_NE(e.detail().find("Bearer"), std::string::npos) << e.detail();
  }
  EXPECT_EQ(service_->job_count(), 0u);
  ClientOptions bad = options_for(0, 0);
  bad.connection.token = "t0ken";
  bad.world_size = 3;  // pp 2 * dp 1 * tp 1 != 3
  try {
    PerseusClient refused(bad, gpu);
    FAIL() << "a job whose degrees do not multiply to its world size was registered";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_NE(e.detail().find("world_size = 3"), std::string::npos) << e.detail();
  }
  ClientOptions good = options_for(0, 0);
  good.connection.token = "t0ken";
  PerseusClient client(good, gpu);
  EXPECT_EQ(service_->job_count(), 1u);
  // The rank's clocks reached the server, highest first.
  const json info = client.connection().get_json("/api/jobs");
  EXPECT_EQ(info.at("jobs")[0].at("ranks_registered"), 1);
  // A second registration of the same rank is refused (409) and names the rank.
  ClientOptions again = good;
  again.job_id = client.job_id();
  try {
    PerseusClient duplicate(again, gpu);
    FAIL() << "the same rank registered twice";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.status(), 409);
    EXPECT_NE(e.detail().find("rank 0"), std::string::npos) << e.detail();
  }
}

TEST_F(ClientFixture, RequestsAreRetriedUntilTheServerComesUp) {
  // Find a free port, then start the server on it a little later.
  start_point_solution();
  const int port = server_->port();
  ClientOptions options = options_for(0, 0);
  options.connection.retry_for_s = 20.0;
  ClientOptions no_retry = options_for(0, 0);
  no_retry.connection.url = "http://127.0.0.1:1";  // nothing listens on port 1
  no_retry.connection.retry_for_s = 0.0;
  server_->stop();
  server_.reset();
  auto later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    HttpOptions http;
    http.port = port;
    server_ = std::make_unique<HttpServer>(*service_, http);
    server_->start();
  });
  EmulatedGpu gpu(six_clock_gpu());
  PerseusClient client(options, gpu);
  later.get();
  EXPECT_EQ(service_->job_count(), 1u);

  try {
    PerseusClient unreachable(no_retry, gpu);
    FAIL() << "registered with no server";
  } catch (const ServerError& e) {
    EXPECT_EQ(e.status(), 0);
  }
}

// A GPU whose energy counter is not supported (pre-Volta): the client reports times only.
class NoEnergyGpu final : public GpuBackend {
 public:
  explicit NoEnergyGpu(EmulatedGpu& inner) : inner_(inner) {}
  int device_count() const override { return 1; }
  std::string name(int d) const override { return inner_.name(d); }
  std::vector<int> supported_graphics_clocks(int d) const override { return inner_.supported_graphics_clocks(d); }
  int max_memory_clock(int d) const override { return inner_.max_memory_clock(d); }
  void set_locked_graphics_clocks(int d, int lo, int hi) override { inner_.set_locked_graphics_clocks(d, lo, hi); }
  void reset_locked_graphics_clocks(int d) override { inner_.reset_locked_graphics_clocks(d); }
  void set_locked_memory_clocks(int d, int lo, int hi) override { inner_.set_locked_memory_clocks(d, lo, hi); }
  void reset_locked_memory_clocks(int d) override { inner_.reset_locked_memory_clocks(d); }
  void reset_power_limit(int d) override { inner_.reset_power_limit(d); }
  std::uint64_t total_energy_mj(int) const override { throw GpuError("nvmlDeviceGetTotalEnergyConsumption: Not Supported"); }
  std::uint64_t power_mw(int d) const override { return inner_.power_mw(d); }

 private:
  EmulatedGpu& inner_;
};

TEST_F(ClientFixture, WithoutAnEnergyCounterTimesAreStillReported) {
  start_point_solution();
  EmulatedGpu gpu0(six_clock_gpu()), gpu1(six_clock_gpu());
  NoEnergyGpu blind(gpu0);
  ClientOptions o0 = options_for(0, 0);
  o0.clock = [&] { return gpu0.now_s(); };
  PerseusClient rank0(o0, blind);
  ClientOptions o1 = options_for(1, 1, rank0.job_id());
  o1.control_clocks = false;  // measures and reports, never locks
  PerseusClient rank1(o1, gpu1);
  EXPECT_EQ(rank1.controller(), nullptr);
  auto other = std::async(std::launch::async, [&] {
    rank1.on_step_begin();
    for (const auto& [name, mhz] : rank1.schedule()) {
      rank1.on_instruction_begin(name);
      rank1.on_instruction_end(name);
    }
    rank1.on_step_end();
  });
  run_step(rank0, gpu0, 0, {"forward", "forward", "backward", "backward"});
  other.get();
  EXPECT_TRUE(gpu1.events().empty()) << "a client that does not control clocks changed one";
  ASSERT_TRUE(rank0.stats().energy_error);
  EXPECT_NE(rank0.stats().energy_error->find("Not Supported"), std::string::npos);
  for (const json& r : dumped_results(rank0.job_id())) {
    if (r.at("rank") != 0) continue;
    EXPECT_EQ(r.at("iter_time").size(), 1u);
    EXPECT_TRUE(r.at("iter_energy").empty());
    EXPECT_EQ(r.at("time_breakdown").at("forward")[0].size(), 2u);
    EXPECT_TRUE(r.at("energy_breakdown").empty());
  }
}

TEST(ServerConnection, UrlsAndPathSegments) {
  EXPECT_THROW(ServerConnection(ConnectionOptions::to("https://x:1")), InputError);
  EXPECT_THROW(ServerConnection(ConnectionOptions::to("http://x:1/api")), InputError);
  EXPECT_THROW(ServerConnection(ConnectionOptions::to("127.0.0.1:7787")), InputError);
  EXPECT_NO_THROW(ServerConnection(ConnectionOptions::to("http://127.0.0.1:7787/")));
  EXPECT_EQ(encode_path_segment("2024-01-01-00-00-00+dp1+pp2+tp1+Frontier+my job/ü"),
            "2024-01-01-00-00-00+dp1+pp2+tp1+Frontier+my%20job%2F%C3%BC");
}

}  // namespace
}  // namespace perseus::client
