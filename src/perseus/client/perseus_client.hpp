// The client a training engine drives: it registers the job and its rank with the server,
// fetches the rank's frequency schedule, and offers the hooks the existing Perseus
// optimizer offers (on_step_begin, on_instruction_begin(name), on_instruction_end(name),
// on_step_end). Before each instruction it hands the planned clock to the asynchronous
// FrequencyController; around each instruction and step it measures time and the GPU's
// energy counter, and reports them to the server (POST /result), which is how the server
// profiles in vivo and learns what the plans cost.
//
// Rounds: a schedule holds one iteration. The client fetches a new one every
// `steps_per_round` steps (the server answers once every rank has asked: a barrier, so all
// ranks switch plans at the same iteration) and reports the round's measurements at its
// last step, before asking for the next round. steps_per_round = 0 fetches once and never
// reports, as the existing client does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/client/frequency_controller.hpp"
#include "perseus/client/server_connection.hpp"
#include "perseus/gpu/gpu_backend.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::client {

// A hook called out of order, or a schedule that does not match what the engine runs.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ClientOptions {
  ConnectionOptions connection;

  // Where this process sits in the job (the existing client's arguments).
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  int dp_degree = 1;
  int pp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;
  std::optional<std::string> job_metadata;
  // Sent with the job's registration so the server knows the pipeline schedule (a perseus
  // extension; the existing server ignores it).
  std::optional<PipelineLayout> layout;
  // Empty: this client registers the job (the existing client does so on global rank 0 and
  // broadcasts the id); otherwise the id another rank registered.
  std::string job_id;

  int device = 0;              // the GPU this process drives
  bool control_clocks = true;  // false: measure and report, never change a clock
  int steps_per_round = 1;     // see above; 0: fetch once, never report
  bool measure_energy = true;  // read the GPU's energy counter around instructions and steps

  // Called before every measurement so that queued GPU work is finished (e.g.
  // torch.cuda.synchronize); none: nothing to wait for (emulated GPUs).
  std::function<void()> synchronize;
  // Seconds on a monotonic clock; none: std::chrono::steady_clock. An emulated GPU passes
  // its virtual clock.
  std::function<double()> clock;
};

struct ClientStats {
  std::uint64_t steps = 0;
  std::uint64_t rounds = 0;            // schedules fetched
  std::uint64_t results_posted = 0;
  std::uint64_t instructions = 0;
  std::uint64_t frequency_requests = 0;
  std::optional<std::string> energy_error;  // why energy is not measured, if it is not
};

class PerseusClient {
 public:
  // Registers the job (when options.job_id is empty) and the rank, with the graphics
  // clocks `gpu` supports for options.device, then starts the frequency controller.
  // Throws ServerError, GpuError or InputError. `gpu` must outlive the client.
  PerseusClient(ClientOptions options, GpuBackend& gpu);
  ~PerseusClient();
  PerseusClient(const PerseusClient&) = delete;
  PerseusClient& operator=(const PerseusClient&) = delete;

  const std::string& job_id() const { return job_id_; }
  const ClientOptions& options() const { return options_; }

  // The hooks. Each throws ClientError when called out of order or when the engine's
  // instruction does not match the schedule's next one, ServerError when the server fails.
  void on_step_begin();
  void on_instruction_begin(std::string_view name);
  void on_instruction_end(std::string_view name);
  void on_step_end();

  // The schedule of the current round (empty before the first step).
  const StageFrequencies& schedule() const { return schedule_; }
  // Null when control_clocks is false.
  FrequencyController* controller() { return controller_.get(); }
  ServerConnection& connection() { return connection_; }
  ClientStats stats() const;
  // Measurements of the round so far, as they will be reported.
  const ProfilingResult& pending_result() const { return result_; }

  // Stops the controller (resetting the clocks) and closes the connection. The hooks must
  // not be called afterwards.
  void close();

 private:
  double now() const;
  // Energy counter in J; nullopt when not measured.
  std::optional<double> energy();
  void sync();
  std::vector<std::vector<double>>& breakdown_for(
      std::vector<std::pair<std::string, std::vector<std::vector<double>>>>& breakdown, std::string_view name);

  ClientOptions options_;
  GpuBackend& gpu_;
  ServerConnection connection_;
  std::string job_id_;
  std::unique_ptr<FrequencyController> controller_;

  StageFrequencies schedule_;
  std::size_t next_ = 0;            // index of the next instruction in schedule_
  bool in_step_ = false;
  std::optional<std::size_t> open_;  // index of the instruction begun and not yet ended
  std::int64_t step_in_round_ = 0;  // steps finished in this round
  bool have_schedule_ = false;
  std::uint64_t rounds_received_ = 0;  // sent with each schedule request (see ServerConnection)

  double step_start_s_ = 0.0;
  std::optional<double> step_start_j_;
  double instruction_start_s_ = 0.0;
  std::optional<double> instruction_start_j_;
  ProfilingResult result_;
  bool energy_ok_ = true;
  ClientStats stats_;
};

}  // namespace perseus::client
