// A server killed with SIGKILL in the middle of a job and restarted on the same port and
// database: every rank's client rides out the outage (its requests are retried), the job
// carries on from where it was, and the ranks run the same plan as before.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "perseus/client/perseus_client.hpp"
#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/server/frontier_table.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::client {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using perseus::server::testing::TempDir;
using perseus::testing::ChildProcess;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

TEST(ServerRestart, EveryRankContinuesThroughASigkill) {
  constexpr int kStages = 2, kPipelines = 2, kWorld = kStages * kPipelines, kSteps = 40;
  TempDir dir;
  const int port = free_port();
  const std::vector<std::string> args = {"serve", "--port", std::to_string(port), "--db",
                                         (dir.path() / "server.db").string(), "--barrier-timeout", "30"};
  const std::regex listening("event=listening");
  auto server = std::make_unique<ChildProcess>(PERSEUS_SERVE_BINARY, args);
  ASSERT_TRUE(server->wait_for_log(listening, 20s)) << server->log();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);

  const Profile profile = perseus::testing::synthetic_profile(kStages, 6, 21);
  std::vector<std::unique_ptr<EmulatedGpu>> gpus;
  std::vector<std::unique_ptr<PerseusClient>> clients;
  for (int r = 0; r < kWorld; ++r) {
    gpus.push_back(std::make_unique<EmulatedGpu>(emulated_gpu_spec_from_profile(profile, 80.0)));
    ClientOptions options;
    options.connection.url = url;
    options.connection.retry_for_s = 30.0;
    options.rank = r;
    options.dp_rank = r / kStages;
    options.pp_rank = r % kStages;
    options.dp_degree = kPipelines;
    options.pp_degree = kStages;
    options.world_size = kWorld;
    options.layout = PipelineLayout{ScheduleKind::k1F1B, 4, 1};
    options.job_id = r == 0 ? "" : clients[0]->job_id();
    EmulatedGpu* gpu = gpus.back().get();
    options.clock = [gpu] { return gpu->now_s(); };
    clients.push_back(std::make_unique<PerseusClient>(options, *gpu));
  }
  const std::string job_id = clients[0]->job_id();
  ServerConnection admin(ConnectionOptions{url, "", 5.0, 30.0, 30.0});
  admin.upload_profile(job_id, server::profile_to_csv(profile), 80.0, 0.001);
  for (int i = 0; i < 600 && admin.get_json("/api/jobs").at("jobs")[0].at("phase") != "frontier"; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(admin.get_json("/api/jobs").at("jobs")[0].at("phase"), "frontier");

  // Every rank runs kSteps steps; the server dies after rank 0's tenth.
  std::atomic<int> rank0_steps{0};
  std::vector<std::vector<StageFrequencies>> seen(kWorld);
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      PerseusClient& client = *clients[static_cast<std::size_t>(r)];
      EmulatedGpu& gpu = *gpus[static_cast<std::size_t>(r)];
      for (int step = 0; step < kSteps; ++step) {
        client.on_step_begin();
        for (const auto& [name, mhz] : client.schedule()) {
          client.on_instruction_begin(name);
          gpu.run(*parse_instruction_kind(name), r % kStages);
          client.on_instruction_end(name);
        }
        client.on_step_end();
        seen[static_cast<std::size_t>(r)].push_back(client.schedule());
        if (r == 0) ++rank0_steps;
      }
    }));
  }
  while (rank0_steps < 10) std::this_thread::sleep_for(1ms);
  const int killed_at = rank0_steps;
  const int status = server->kill_and_wait(SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::this_thread::sleep_for(300ms);  // the ranks keep retrying meanwhile
  server = std::make_unique<ChildProcess>(PERSEUS_SERVE_BINARY, args);
  ASSERT_TRUE(server->wait_for_log(listening, 20s)) << server->log();

  for (auto& rank : ranks) rank.wait_for(60s);
  for (int r = 0; r < kWorld; ++r) {
    auto& rank = ranks[static_cast<std::size_t>(r)];
    ASSERT_EQ(rank.wait_for(0s), std::future_status::ready) << "rank " << r << " did not get through the restart";
    try {
      rank.get();
    } catch (const std::exception& e) {
      std::string steps;
      for (const auto& s : seen) steps += std::to_string(s.size()) + " ";
      FAIL() << "rank " << r << " (steps done by rank: " << steps << ", killed at " << killed_at << "): " << e.what()
             << "\nserver log:\n" << server->log();
    }
  }
  EXPECT_LT(killed_at, kSteps) << "the server died after the job ended: nothing was tested";
  for (int r = 0; r < kWorld; ++r) {
    const auto& plans = seen[static_cast<std::size_t>(r)];
    ASSERT_EQ(plans.size(), static_cast<std::size_t>(kSteps));
    for (const StageFrequencies& plan : plans) EXPECT_EQ(plan, plans.front()) << "rank " << r;
  }
  EXPECT_NE(server->log().find("event=recover job_id=" + job_id + " phase=frontier"), std::string::npos)
      << server->log();
  EXPECT_EQ(admin.get_json("/api/jobs").at("jobs")[0].at("job_id"), job_id);
  for (auto& client : clients) client->close();
  admin.close();
  EXPECT_EQ(WEXITSTATUS(server->kill_and_wait(SIGTERM)), 0);
}

}  // namespace
}  // namespace perseus::client
