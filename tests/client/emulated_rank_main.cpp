// One rank of an emulated training job, as its own process: an EmulatedGpu built from a
// profile, a PerseusClient that talks to the server and drives the GPU's clock through the
// asynchronous FrequencyController, and the fabric (fd 3) for pipeline messages and the
// end-of-iteration synchronisation. The rank runs its stage's 1F1B (or GPipe) instructions
// on virtual time and prints one JSON line per iteration: its time, energy, and the clock
// every instruction ran at.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fabric.hpp"
#include "perseus/client/perseus_client.hpp"
#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/schedule/schedule.hpp"

namespace {

struct Args {
  std::string server;
  std::string token;
  int rank = 0, dp_rank = 0, pp_rank = 0, dp_degree = 1, pp_degree = 1;
  std::string profile;
  double p_blocking = 0.0;
  std::string schedule = "1f1b";
  int microbatches = 1;
  int fabric_fd = 3;
  int steps_per_round = 1;
  int max_iterations = 10000;
};

int run(const Args& args) {
  using namespace perseus;
  const Profile profile = Profile::read_csv(args.profile);
  EmulatedGpu gpu(emulated_gpu_spec_from_profile(profile, args.p_blocking));
  testing::FabricEndpoint fabric(args.fabric_fd);
  const ScheduleKind kind = parse_schedule_kind(args.schedule);
  const Schedule schedule = make_schedule(ScheduleSpec{kind, args.pp_degree, args.microbatches, 1, false});
  const std::vector<Instruction>& mine = schedule.per_stage.at(static_cast<std::size_t>(args.pp_rank));
  const auto rank_of = [&](int dp, int pp) { return dp * args.pp_degree + pp; };

  client::ClientOptions options;
  options.connection.url = args.server;
  options.connection.token = args.token;
  options.connection.read_timeout_s = 60.0;
  options.connection.retry_for_s = 10.0;
  options.rank = args.rank;
  options.dp_rank = args.dp_rank;
  options.pp_rank = args.pp_rank;
  options.dp_degree = args.dp_degree;
  options.pp_degree = args.pp_degree;
  options.world_size = args.dp_degree * args.pp_degree;
  options.layout = client::PipelineLayout{kind, args.microbatches, 1};
  options.job_metadata = "emulated";
  options.steps_per_round = args.steps_per_round;
  options.clock = [&gpu] { return gpu.now_s(); };
  if (args.rank != 0) options.job_id = fabric.fetch();  // global rank 0 registers the job and shares its id
  client::PerseusClient client(options, gpu);
  if (args.rank == 0) fabric.publish(client.job_id());

  for (int iteration = 0; iteration < args.max_iterations; ++iteration) {
    const double slowdown = gpu.slowdown();
    client.on_step_begin();
    const double start_s = gpu.now_s();
    const double start_j = gpu.energy_j();
    nlohmann::json clocks = nlohmann::json::array();
    for (const Instruction& instruction : mine) {
      const int tag = instruction.microbatch * 2 + (instruction.kind == InstructionKind::kBackward ? 1 : 0);
      std::optional<double> ready;
      if (instruction.kind == InstructionKind::kForward && args.pp_rank > 0) {
        ready = fabric.receive(rank_of(args.dp_rank, args.pp_rank - 1), tag);
      } else if (instruction.kind == InstructionKind::kBackward && args.pp_rank + 1 < args.pp_degree) {
        ready = fabric.receive(rank_of(args.dp_rank, args.pp_rank + 1), tag);
      }
      if (ready && *ready > gpu.now_s()) gpu.idle(*ready - gpu.now_s());  // blocked on the previous stage
      const std::string name(to_string(instruction.kind));
      client.on_instruction_begin(name);
      // The controller changes the clock on its own thread; on virtual time the change is
      // instantaneous, so the instruction waits for it instead of racing it.
      if (client.controller()) client.controller()->wait_idle();
      clocks.push_back(gpu.graphics_clock_mhz());
      gpu.run(instruction.kind, args.pp_rank);
      client.on_instruction_end(name);
      if (instruction.kind == InstructionKind::kForward && args.pp_rank + 1 < args.pp_degree) {
        fabric.send(rank_of(args.dp_rank, args.pp_rank + 1), tag, gpu.now_s());
      } else if (instruction.kind == InstructionKind::kBackward && args.pp_rank > 0) {
        fabric.send(rank_of(args.dp_rank, args.pp_rank - 1), tag, gpu.now_s());
      }
    }
    const double busy_s = gpu.now_s() - start_s;
    // The gradient all-reduce: every rank waits for the slowest pipeline.
    const auto synced = fabric.sync(iteration, gpu.now_s());
    if (synced.end_time > gpu.now_s()) gpu.idle(synced.end_time - gpu.now_s());
    client.on_step_end();
    nlohmann::json record = {{"iteration", iteration},   {"rank", args.rank},
                             {"dp_rank", args.dp_rank},  {"pp_rank", args.pp_rank},
                             {"time_s", gpu.now_s() - start_s}, {"busy_s", busy_s},
                             {"energy_j", gpu.energy_j() - start_j}, {"slowdown", slowdown},
                             {"clocks", std::move(clocks)}};
    std::cout << record.dump() << std::endl;
    gpu.set_slowdown(synced.slowdown);
    if (synced.stop) break;
  }
  client.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One emulated rank of a pipeline-parallel job driven by a perseus server"};
  Args args;
  app.add_option("--server", args.server)->required();
  app.add_option("--token", args.token);
  app.add_option("--rank", args.rank)->required();
  app.add_option("--dp-rank", args.dp_rank)->required();
  app.add_option("--pp-rank", args.pp_rank)->required();
  app.add_option("--dp-degree", args.dp_degree)->required();
  app.add_option("--pp-degree", args.pp_degree)->required();
  app.add_option("--profile", args.profile)->required();
  app.add_option("--p-blocking", args.p_blocking)->required();
  app.add_option("--schedule", args.schedule);
  app.add_option("--microbatches", args.microbatches)->required();
  app.add_option("--fabric-fd", args.fabric_fd);
  app.add_option("--steps-per-round", args.steps_per_round);
  app.add_option("--max-iterations", args.max_iterations);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::cerr << "emulated rank " << args.rank << ": " << e.what() << std::endl;
    return 1;
  }
}
