#include "perseus/client/perseus_client.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::client {
namespace {

std::string describe_next(const StageFrequencies& schedule, std::size_t next) {
  if (next >= schedule.size()) return "none";
  return fmt::format("'{}' at {} MHz (instruction {} of {})", schedule[next].first, schedule[next].second, next + 1,
                     schedule.size());
}

}  // namespace

PerseusClient::PerseusClient(ClientOptions options, GpuBackend& gpu)
    : options_(std::move(options)), gpu_(gpu), connection_(options_.connection) {
  if (options_.steps_per_round < 0) {
    throw InputError(fmt::format("PerseusClient: steps_per_round must be >= 0, got {}", options_.steps_per_round));
  }
  if (options_.device < 0 || options_.device >= gpu_.device_count()) {
    throw InputError(fmt::format("PerseusClient: device {} out of range: {} device(s)", options_.device,
                                 gpu_.device_count()));
  }
  const std::vector<int> clocks = gpu_.supported_graphics_clocks(options_.device);
  // The controller first: a GPU this process may not control fails before the server
  // hears of the rank.
  if (options_.control_clocks) controller_ = std::make_unique<FrequencyController>(gpu_, options_.device);

  job_id_ = options_.job_id;
  if (job_id_.empty()) {
    JobInfo info;
    info.pp_degree = options_.pp_degree;
    info.dp_degree = options_.dp_degree;
    info.tp_degree = options_.tp_degree;
    info.world_size = options_.world_size;
    info.job_metadata = options_.job_metadata;
    info.layout = options_.layout;
    job_id_ = connection_.register_job(info);
  }
  RankInfo rank;
  rank.rank = options_.rank;
  rank.dp_rank = options_.dp_rank;
  rank.pp_rank = options_.pp_rank;
  rank.tp_rank = options_.tp_rank;
  rank.available_frequencies = clocks;
  connection_.register_rank(job_id_, rank);
  result_.rank = options_.rank;
}

PerseusClient::~PerseusClient() { close(); }

void PerseusClient::close() {
  controller_.reset();
  connection_.close();
}

double PerseusClient::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::optional<double> PerseusClient::energy() {
  if (!options_.measure_energy || !energy_ok_) return std::nullopt;
  try {
    return static_cast<double>(gpu_.total_energy_mj(options_.device)) / 1000.0;
  } catch (const GpuError& e) {
    // An older GPU without the counter: keep training, report times only.
    energy_ok_ = false;
    stats_.energy_error = e.what();
    return std::nullopt;
  }
}

void PerseusClient::sync() {
  if (options_.synchronize) options_.synchronize();
}

std::vector<std::vector<double>>& PerseusClient::breakdown_for(
    std::vector<std::pair<std::string, std::vector<std::vector<double>>>>& breakdown, std::string_view name) {
  auto it = std::find_if(breakdown.begin(), breakdown.end(), [&](const auto& entry) { return entry.first == name; });
  if (it == breakdown.end()) {
    breakdown.emplace_back(std::string(name), std::vector<std::vector<double>>{});
    it = std::prev(breakdown.end());
  }
  // One list per iteration of the round, this iteration's included.
  it->second.resize(std::max(it->second.size(), result_.iter_time.size() + 1));
  return it->second;
}

void PerseusClient::on_step_begin() {
  if (in_step_) throw ClientError("on_step_begin: the previous step has not ended (call on_step_end first)");
  const bool fetch = !have_schedule_ || (options_.steps_per_round > 0 && step_in_round_ == 0);
  if (fetch) {
    schedule_ = connection_.get_schedule(job_id_, options_.rank, rounds_received_);
    ++rounds_received_;
    have_schedule_ = true;
    ++stats_.rounds;
  }
  next_ = 0;
  in_step_ = true;
  sync();
  step_start_s_ = now();
  step_start_j_ = energy();
}

void PerseusClient::on_instruction_begin(std::string_view name) {
  if (!in_step_) throw ClientError(fmt::format("on_instruction_begin('{}'): no step has begun", name));
  if (open_) {
    throw ClientError(fmt::format("on_instruction_begin('{}'): '{}' has not ended", name, schedule_[*open_].first));
  }
  if (next_ >= schedule_.size()) {
    throw ClientError(fmt::format("on_instruction_begin('{}'): the schedule of rank {} has only {} instructions",
                                  name, options_.rank, schedule_.size()));
  }
  if (schedule_[next_].first != name) {
    throw ClientError(fmt::format("on_instruction_begin('{}'): the schedule of rank {} expects {}", name,
                                  options_.rank, describe_next(schedule_, next_)));
  }
  sync();
  if (controller_) {
    controller_->set_frequency(schedule_[next_].second);
    ++stats_.frequency_requests;
  }
  open_ = next_++;
  instruction_start_s_ = now();
  instruction_start_j_ = energy();
}

void PerseusClient::on_instruction_end(std::string_view name) {
  if (!open_) throw ClientError(fmt::format("on_instruction_end('{}'): no instruction has begun", name));
  if (schedule_[*open_].first != name) {
    throw ClientError(fmt::format("on_instruction_end('{}'): the instruction begun was '{}'", name,
                                  schedule_[*open_].first));
  }
  sync();
  const double seconds = now() - instruction_start_s_;
  const std::optional<double> joules = energy();
  if (options_.steps_per_round > 0) {
    const std::size_t iteration = result_.iter_time.size();
    breakdown_for(result_.time_breakdown, name)[iteration].push_back(seconds);
    if (joules && instruction_start_j_) {
      breakdown_for(result_.energy_breakdown, name)[iteration].push_back(*joules - *instruction_start_j_);
    }
  }
  open_.reset();
  ++stats_.instructions;
}

void PerseusClient::on_step_end() {
  if (!in_step_) throw ClientError("on_step_end: no step has begun");
  if (open_) throw ClientError(fmt::format("on_step_end: '{}' has not ended", schedule_[*open_].first));
  if (next_ != schedule_.size()) {
    // Leave the step so that the engine may go on after handling the error.
    in_step_ = false;
    throw ClientError(fmt::format("on_step_end: the step ran {} of the {} instructions of rank {}'s schedule; next "
                                  "expected {}",
                                  next_, schedule_.size(), options_.rank, describe_next(schedule_, next_)));
  }
  sync();
  const double seconds = now() - step_start_s_;
  const std::optional<double> joules = energy();
  in_step_ = false;
  ++stats_.steps;
  if (options_.steps_per_round == 0) return;
  result_.iter_time.push_back(seconds);
  if (joules && step_start_j_) result_.iter_energy.push_back(*joules - *step_start_j_);
  if (++step_in_round_ < options_.steps_per_round) return;
  // Every instruction name has one list per iteration, even one that did not run in some.
  for (auto* breakdown : {&result_.time_breakdown, &result_.energy_breakdown}) {
    for (auto& [name, iterations] : *breakdown) iterations.resize(result_.iter_time.size());
  }
  step_in_round_ = 0;
  ProfilingResult report = std::move(result_);
  result_ = ProfilingResult{};
  result_.rank = options_.rank;
  connection_.post_result(job_id_, report);
  ++stats_.results_posted;
}

ClientStats PerseusClient::stats() const { return stats_; }

}  // namespace perseus::client
