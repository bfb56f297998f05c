// The messages of the protocol existing training jobs speak (docs/runtime.md, "The server"),
// read strictly from JSON: a wrong type, a missing field or an out-of-range value is an
// ApiError 422 naming the field; text that is not JSON is an ApiError 400.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/frequencies.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/protocol/api_error.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::protocol {

// How a job's iteration is laid out: what the server needs to list a stage's instructions.
// Not part of the existing protocol; a job may send it with its JobInfo, with its profile,
// or the operator gives it in ZEUS_PFO_SCHEDULER_ARGS.
struct PipelineLayout {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int microbatches = 0;
  int chunks = 1;

  friend bool operator==(const PipelineLayout&, const PipelineLayout&) = default;
};

struct JobInfo {
  std::string job_id;  // empty in a registration; the server assigns it
  int pp_degree = 1;
  int dp_degree = 1;
  int tp_degree = 1;
  int world_size = 1;
  std::optional<std::string> job_metadata;
  std::optional<PipelineLayout> layout;  // extension fields "schedule", "microbatches", "chunks"
};

struct RankInfo {
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  std::vector<int> available_frequencies;  // MHz, as the rank's GPU supports them
};

struct ProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;    // s, one per iteration
  std::vector<double> iter_energy;  // J, one per iteration
  // instruction name -> per iteration, one value per instruction of that name
  std::vector<std::pair<std::string, std::vector<std::vector<double>>>> time_breakdown;
  std::vector<std::pair<std::string, std::vector<std::vector<double>>>> energy_breakdown;
};

// POST /straggler: accelerator `id` (a global rank of the job) will run `degree` times
// slower from `delay_s` seconds on; degree 1 means it is back to normal.
struct StragglerNotice {
  std::optional<std::string> job_id;  // may be left out when the server has exactly one job
  int id = 0;
  double delay_s = 0.0;
  double degree = 1.0;
};

// Parses `text` as a JSON object; ApiError 400 naming `what` if it is not one.
nlohmann::json parse_json_object(std::string_view text, std::string_view what);

JobInfo parse_job_info(const nlohmann::json& body);
RankInfo parse_rank_info(const nlohmann::json& body);
ProfilingResult parse_profiling_result(const nlohmann::json& body);
StragglerNotice parse_straggler_notice(const nlohmann::json& body);
PipelineLayout parse_layout(const nlohmann::json& object, std::string_view where);

nlohmann::json to_json(const JobInfo& info);
nlohmann::json to_json(const RankInfo& info);
nlohmann::json to_json(const PipelineLayout& layout);
nlohmann::json to_json(const ProfilingResult& result);
nlohmann::json to_json(const StragglerNotice& notice);
// {"rank": R, "frequencies": [["forward", 1410], ...]}
nlohmann::json frequency_schedule_json(int rank, const StageFrequencies& frequencies);

// Reads a FrequencySchedule answer strictly: ApiError 422 naming what is wrong.
StageFrequencies parse_frequency_schedule(const nlohmann::json& body, int expected_rank);

// "<YYYY-MM-DD-HH-MM-SS>+dp<d>+pp<p>+tp<t>+<SchedulerName>[+<job_metadata>]", local time;
// as zeus, an empty job_metadata adds nothing.
std::string make_job_id(const JobInfo& info, std::string_view scheduler_name, std::time_t when);

// The per-stage instruction names of one iteration, in execution order.
std::vector<std::vector<std::string>> stage_instruction_names(const PipelineLayout& layout, int stages);

}  // namespace perseus::protocol
