#include "perseus/protocol/protocol.hpp"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"
#include "perseus/protocol/api_error.hpp"

namespace perseus::protocol {
namespace {

constexpr int kMaxDegree = 1 << 20;  // bounds the per-rank tables a registration allocates

using json = nlohmann::json;

std::string type_name(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "an integer";
  if (value.is_number_float()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void invalid(std::string_view where, std::string_view expected, const json& got) {
  throw ApiError(422, fmt::format("{}: expected {}, got {}", where, expected, type_name(got)));
}

// Reads the fields of one JSON object, naming "<message>.<field>" in every error.
class Fields {
 public:
  Fields(const json& object, std::string_view message) : object_(object), message_(message) {
    if (!object.is_object()) invalid(message, "a JSON object", object);
  }

  bool has(const char* name) const { return object_.contains(name) && !object_.at(name).is_null(); }

  const json& required(const char* name) const {
    if (!object_.contains(name)) throw ApiError(422, fmt::format("{}.{}: field required", message_, name));
    return object_.at(name);
  }

  int integer(const char* name, long long min_value, long long max_value) const {
    return integer_value(required(name), where(name), min_value, max_value);
  }

  double number(const char* name, double min_value) const {
    return number_value(required(name), where(name), min_value);
  }

  std::string string(const char* name) const {
    const json& value = required(name);
    if (!value.is_string()) invalid(where(name), "a string", value);
    return value.get<std::string>();
  }

  std::string where(const char* name) const { return fmt::format("{}.{}", message_, name); }

  static int integer_value(const json& value, const std::string& where, long long min_value, long long max_value) {
    if (!value.is_number_integer()) invalid(where, "an integer", value);
    // Unsigned values above int64 would wrap in get<long long>; anything that large is out of range.
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max_value)) {
      throw ApiError(422, fmt::format("{}: must be at most {}, got {}", where, max_value, value.dump()));
    }
    const long long v = value.get<long long>();
    if (v < min_value) throw ApiError(422, fmt::format("{}: must be at least {}, got {}", where, min_value, v));
    if (v > max_value) throw ApiError(422, fmt::format("{}: must be at most {}, got {}", where, max_value, v));
    return static_cast<int>(v);
  }

  static double number_value(const json& value, const std::string& where, double min_value) {
    if (!value.is_number()) invalid(where, "a number", value);
    const double v = value.get<double>();
    if (!std::isfinite(v)) throw ApiError(422, fmt::format("{}: must be finite", where));
    if (v < min_value) throw ApiError(422, fmt::format("{}: must be at least {}, got {}", where, min_value, v));
    return v;
  }

 private:
  const json& object_;
  std::string message_;
};

// What a rank can plausibly have measured. Anything beyond is a broken counter or a forged
// result, and would overflow the sums in-vivo profiling builds (1e308 + 1e308 = inf).
struct MeasurementBounds {
  const char* unit;
  double max;
  const char* max_note;
  bool zero_allowed;  // an iteration takes time; a short span may read no energy or time
};
constexpr MeasurementBounds kIterationTime{"s", 86400.0, " (one day)", false};
constexpr MeasurementBounds kInstructionTime{"s", 86400.0, " (one day)", true};
constexpr MeasurementBounds kEnergy{"J", 1e9, "", true};

std::vector<double> number_list(const json& value, const std::string& where, const MeasurementBounds& bounds) {
  if (!value.is_array()) invalid(where, "an array of numbers", value);
  std::vector<double> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!value[i].is_number()) invalid(at, "a number", value[i]);
    const double v = value[i].get<double>();
    // {:g}: a forged 1e308 is named as such, not as 309 digits.
    if (!std::isfinite(v)) throw ApiError(422, fmt::format("{}: must be finite", at));
    if (v < 0) throw ApiError(422, fmt::format("{}: must not be negative, got {:g} {}", at, v, bounds.unit));
    if (v == 0 && !bounds.zero_allowed) throw ApiError(422, fmt::format("{}: must be positive, got 0", at));
    if (v > bounds.max) {
      throw ApiError(422, fmt::format("{}: {:g} {} is beyond any plausible measurement: at most {:g} {}{}", at, v,
                                      bounds.unit, bounds.max, bounds.unit, bounds.max_note));
    }
    out.push_back(v);
  }
  return out;
}

bool is_instruction_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

std::vector<std::pair<std::string, std::vector<std::vector<double>>>> breakdown(const Fields& fields,
                                                                                const char* name,
                                                                                const MeasurementBounds& bounds) {
  std::vector<std::pair<std::string, std::vector<std::vector<double>>>> out;
  if (!fields.has(name)) return out;
  const json& value = fields.required(name);
  const std::string where = fields.where(name);
  if (!value.is_object()) invalid(where, "an object of instruction name -> [[values] per iteration]", value);
  for (const auto& [instruction, iterations] : value.items()) {
    const std::string at = fmt::format("{}.{}", where, instruction);
    if (!is_instruction_name(instruction)) {
      throw ApiError(422, fmt::format("{}: an instruction name must be 1-64 letters, digits, '_' or '-'", at));
    }
    if (!iterations.is_array()) invalid(at, "an array (one list per iteration)", iterations);
    std::vector<std::vector<double>> lists;
    for (std::size_t i = 0; i < iterations.size(); ++i) {
      lists.push_back(number_list(iterations[i], fmt::format("{}[{}]", at, i), bounds));
    }
    out.emplace_back(instruction, std::move(lists));
  }
  return out;
}

// zeus takes any string as job_metadata, and so does this server: the job id that carries it
// is percent-encoded by clients, sanitised as a file name (the dump's) and quoted in logs
// wherever it is used. Only its size is bounded, so that the id fits, percent-encoded (three
// bytes per byte at worst), in the request line of every later request of the job: the HTTP
// layer refuses headers beyond 16 KiB, and zeus's server would register a job no rank can reach.
constexpr std::size_t kMaxMetadataBytes = 4096;

void check_metadata(const std::string& metadata) {
  if (metadata.size() > kMaxMetadataBytes) {
    throw ApiError(422, fmt::format("JobInfo.job_metadata: at most {} bytes (it becomes part of the job id, which "
                                    "every request of the job carries in its URL), got {}",
                                    kMaxMetadataBytes, metadata.size()));
  }
}

}  // namespace

nlohmann::json parse_json_object(std::string_view text, std::string_view what) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw ApiError(400, fmt::format("{}: the body is not valid JSON", what));
  if (!value.is_object()) invalid(what, "a JSON object", value);
  return value;
}

PipelineLayout parse_layout(const nlohmann::json& object, std::string_view where) {
  Fields fields(object, where);
  PipelineLayout layout;
  if (fields.has("schedule")) {
    try {
      layout.kind = parse_schedule_kind(fields.string("schedule"));
    } catch (const InputError& e) {
      throw ApiError(422, fmt::format("{}: {}", fields.where("schedule"), e.what()));
    }
  }
  layout.microbatches = fields.integer("microbatches", 1, limits::kMaxMicrobatches);
  if (fields.has("chunks")) layout.chunks = fields.integer("chunks", 1, limits::kMaxChunks);
  return layout;
}

JobInfo parse_job_info(const nlohmann::json& body) {
  Fields fields(body, "JobInfo");
  JobInfo info;
  // Optional and empty, as in the existing client's model (`job_id: str = ""`).
  if (body.contains("job_id")) {
    const json& id = body.at("job_id");
    if (!id.is_string()) invalid(fields.where("job_id"), "a string", id);
    info.job_id = id.get<std::string>();
    if (!info.job_id.empty()) throw ApiError(422, "JobInfo.job_id: must be empty; the server assigns the id");
  }
  info.pp_degree = fields.integer("pp_degree", 1, limits::kMaxStages);  // a pipeline's stages, as the solver's limit
  info.dp_degree = fields.integer("dp_degree", 1, kMaxDegree);
  info.tp_degree = fields.integer("tp_degree", 1, kMaxDegree);
  info.world_size = fields.integer("world_size", 1, kMaxDegree);
  const long long product = static_cast<long long>(info.pp_degree) * info.dp_degree * info.tp_degree;
  if (product != info.world_size) {
    throw ApiError(422, fmt::format("JobInfo: pp_degree * dp_degree * tp_degree = {} * {} * {} = {} must equal "
                                    "world_size = {}",
                                    info.pp_degree, info.dp_degree, info.tp_degree, product, info.world_size));
  }
  if (fields.has("job_metadata")) {
    info.job_metadata = fields.string("job_metadata");
    check_metadata(*info.job_metadata);
  }
  if (fields.has("microbatches")) {
    info.layout = parse_layout(body, "JobInfo");
    try {  // sizes beyond the solver's limits are refused before anything is allocated for them
      validate_schedule({info.layout->kind, info.pp_degree, info.layout->microbatches, info.layout->chunks, false});
    } catch (const InputError& e) {
      throw ApiError(422, std::string("JobInfo: ") + e.what());
    }
  }
  return info;
}

RankInfo parse_rank_info(const nlohmann::json& body) {
  Fields fields(body, "RankInfo");
  RankInfo info;
  info.rank = fields.integer("rank", 0, kMaxDegree);
  info.dp_rank = fields.integer("dp_rank", 0, kMaxDegree);
  info.pp_rank = fields.integer("pp_rank", 0, kMaxDegree);
  info.tp_rank = fields.integer("tp_rank", 0, kMaxDegree);
  const json& frequencies = fields.required("available_frequencies");
  const std::string where = fields.where("available_frequencies");
  if (!frequencies.is_array()) invalid(where, "an array of integers (MHz)", frequencies);
  if (frequencies.size() > 4096) throw ApiError(422, where + ": at most 4096 frequencies");
  for (std::size_t i = 0; i < frequencies.size(); ++i) {
    info.available_frequencies.push_back(
        Fields::integer_value(frequencies[i], fmt::format("{}[{}]", where, i), 1, 100000));
  }
  return info;
}

ProfilingResult parse_profiling_result(const nlohmann::json& body) {
  Fields fields(body, "ProfilingResult");
  ProfilingResult result;
  result.rank = fields.integer("rank", 0, kMaxDegree);
  if (fields.has("iter_time")) {
    result.iter_time = number_list(fields.required("iter_time"), fields.where("iter_time"), kIterationTime);
  }
  if (fields.has("iter_energy")) {
    result.iter_energy = number_list(fields.required("iter_energy"), fields.where("iter_energy"), kEnergy);
  }
  result.time_breakdown = breakdown(fields, "time_breakdown", kInstructionTime);
  result.energy_breakdown = breakdown(fields, "energy_breakdown", kEnergy);
  return result;
}

StragglerNotice parse_straggler_notice(const nlohmann::json& body) {
  Fields fields(body, "Straggler");
  StragglerNotice notice;
  if (fields.has("job_id")) notice.job_id = fields.string("job_id");
  notice.id = fields.integer("id", 0, kMaxDegree);
  notice.delay_s = fields.has("delay_s") ? fields.number("delay_s", 0.0) : 0.0;
  notice.degree = fields.number("degree", 1.0);
  if (notice.delay_s > 365.0 * 24 * 3600) throw ApiError(422, "Straggler.delay_s: at most one year");
  if (notice.degree > 1000.0) throw ApiError(422, "Straggler.degree: at most 1000");
  return notice;
}

nlohmann::json to_json(const PipelineLayout& layout) {
  return {{"schedule", std::string(to_string(layout.kind))},
          {"microbatches", layout.microbatches},
          {"chunks", layout.chunks}};
}

nlohmann::json to_json(const JobInfo& info) {
  json out = {{"job_id", info.job_id},         {"pp_degree", info.pp_degree},
              {"dp_degree", info.dp_degree},   {"tp_degree", info.tp_degree},
              {"world_size", info.world_size}, {"job_metadata", nullptr}};
  if (info.job_metadata) out["job_metadata"] = *info.job_metadata;
  if (info.layout) out.update(to_json(*info.layout));
  return out;
}

nlohmann::json to_json(const RankInfo& info) {
  return {{"rank", info.rank},
          {"dp_rank", info.dp_rank},
          {"pp_rank", info.pp_rank},
          {"tp_rank", info.tp_rank},
          {"available_frequencies", info.available_frequencies}};
}

nlohmann::json to_json(const ProfilingResult& result) {
  const auto breakdown_json = [](const auto& breakdown) {
    json out = json::object();
    for (const auto& [name, iterations] : breakdown) out[name] = iterations;
    return out;
  };
  return {{"rank", result.rank},
          {"iter_time", result.iter_time},
          {"iter_energy", result.iter_energy},
          {"time_breakdown", breakdown_json(result.time_breakdown)},
          {"energy_breakdown", breakdown_json(result.energy_breakdown)}};
}

nlohmann::json to_json(const StragglerNotice& notice) {
  json out = {{"id", notice.id}, {"delay_s", notice.delay_s}, {"degree", notice.degree}};
  if (notice.job_id) out["job_id"] = *notice.job_id;
  return out;
}

StageFrequencies parse_frequency_schedule(const nlohmann::json& body, int expected_rank) {
  Fields fields(body, "FrequencySchedule");
  const int rank = fields.integer("rank", 0, kMaxDegree);
  if (rank != expected_rank) {
    throw ApiError(422, fmt::format("FrequencySchedule.rank: the schedule is for rank {}, not rank {}", rank,
                                    expected_rank));
  }
  const json& list = fields.required("frequencies");
  const std::string where = fields.where("frequencies");
  if (!list.is_array()) invalid(where, "an array of [name, MHz] pairs", list);
  StageFrequencies out;
  out.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& entry = list[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string()) invalid(at, "a [name, MHz] pair", entry);
    out.emplace_back(entry[0].get<std::string>(), Fields::integer_value(entry[1], at + "[1]", 1, 100000));
  }
  return out;
}

nlohmann::json frequency_schedule_json(int rank, const StageFrequencies& frequencies) {
  json list = json::array();
  for (const auto& [name, mhz] : frequencies) list.push_back(json::array({name, mhz}));
  return {{"rank", rank}, {"frequencies", std::move(list)}};
}

std::string make_job_id(const JobInfo& info, std::string_view scheduler_name, std::time_t when) {
  std::tm local{};
  localtime_r(&when, &local);
  std::string id = fmt::format("{:04}-{:02}-{:02}-{:02}-{:02}-{:02}+dp{}+pp{}+tp{}+{}", local.tm_year + 1900,
                               local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec,
                               info.dp_degree, info.pp_degree, info.tp_degree, scheduler_name);
  if (info.job_metadata && !info.job_metadata->empty()) id += "+" + *info.job_metadata;  // zeus: `if job_metadata:`
  return id;
}

std::vector<std::vector<std::string>> stage_instruction_names(const PipelineLayout& layout, int stages) {
  const Schedule schedule = make_schedule(ScheduleSpec{layout.kind, stages, layout.microbatches, layout.chunks, false});
  std::vector<std::vector<std::string>> names(schedule.per_stage.size());
  for (std::size_t s = 0; s < schedule.per_stage.size(); ++s) {
    for (const Instruction& instruction : schedule.per_stage[s]) names[s].emplace_back(to_string(instruction.kind));
  }
  return names;
}

}  // namespace perseus::protocol
