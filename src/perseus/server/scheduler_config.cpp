#include "perseus/server/scheduler_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/plan_files.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;

void check_keys(const json& args, const std::string& scheduler, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : args.items()) {
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
      std::string names;
      for (const char* a : allowed) names += std::string(names.empty() ? "" : ", ") + a;
      throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: unknown key '{}' for {} (known: {})", key, scheduler, names));
    }
  }
}

double positive_arg(const json& args, const char* key) {
  const json& value = args.at(key);
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
    throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: '{}' must be a positive number, got {}", key, value.dump()));
  }
  return value.get<double>();
}

// A number given as text, as pydantic's lax mode reads "4" or " 83.64 ".
std::optional<double> number_in_string(std::string text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::nullopt;
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  if (text.front() == '+') text.erase(0, 1);
  const json parsed = json::parse(text, nullptr, false);
  if (!parsed.is_number()) return std::nullopt;
  return parsed.get<double>();
}

// Integer arguments as pydantic reads an int (what zeus's settings do): 4, 4.0 and "4" are 4.
// 4.5 is refused rather than cut to 4 as pydantic v1 would; booleans are refused too.
json lax_integer(const json& value, const char* key) {
  if (value.is_number_integer()) return value;
  std::optional<double> number;
  if (value.is_number()) number = value.get<double>();
  if (value.is_string()) number = number_in_string(value.get<std::string>());
  if (!number || !std::isfinite(*number) || std::trunc(*number) != *number || std::fabs(*number) > 9.0e15) {
    throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: '{}' must be a whole number, got {}", key, value.dump()));
  }
  // As JSON text would parse it: unsigned when not negative.
  if (*number >= 0) return static_cast<std::uint64_t>(*number);
  return static_cast<std::int64_t>(*number);
}

// Number arguments as pydantic reads a float: 83.64 and "83.64" alike.
json lax_number(const json& value, const char* key) {
  if (!value.is_string()) return value;  // checked where it is read
  const std::optional<double> number = number_in_string(value.get<std::string>());
  if (!number) throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: '{}' must be a number, got {}", key, value.dump()));
  return *number;
}

// The arguments with numbers written as pydantic accepts them turned into plain JSON numbers,
// so that every reader below sees one form.
json with_lax_numbers(json args) {
  for (const char* key : {"microbatches", "chunks", "max_energy_rises", "iterations_per_frequency", "plan"}) {
    if (args.contains(key)) args[key] = lax_integer(args.at(key), key);
  }
  for (const char* key : {"p_blocking", "unit_time", "deadline_s", "exact_seconds"}) {
    if (args.contains(key)) args[key] = lax_number(args.at(key), key);
  }
  return args;
}

PipelineFrequencies read_point_plan_file(const std::string& path) {
  try {
    return read_freqs_pipeline(path);  // parsed as data, never evaluated
  } catch (const InputError& e) {
    throw InputError(std::string("ZEUS_PFO_SCHEDULER_ARGS: solution_path: ") + e.what());
  }
}

}  // namespace

bool SchedulerConfig::serves_point_plan() const { return name == "PointSolution" || name == "PointSolution3D"; }

PlanLists point_plan_lists(const SchedulerConfig& config, int pp_degree, int world_size) {
  const std::size_t lists = config.point_plan.size();
  if (config.name == "PointSolution" && lists == static_cast<std::size_t>(world_size)) return PlanLists::kPerRank;
  if (lists == static_cast<std::size_t>(pp_degree)) return PlanLists::kPerStage;
  if (config.name == "PointSolution3D") {
    throw ApiError(422, fmt::format("JobInfo.pp_degree: the PointSolution3D plan {} has {} stages, the job {} "
                                    "(PointSolution3D serves every rank its stage's list)",
                                    config.point_plan_path, lists, pp_degree));
  }
  throw ApiError(422, fmt::format("JobInfo: the PointSolution plan {} has {} stages (lists); the job needs "
                                  "world_size = {} (one list per rank, as zeus reads it) or pp_degree = {} (one per "
                                  "stage; PointSolution3D is the scheduler for that)",
                                  config.point_plan_path, lists, world_size, pp_degree));
}

SchedulerConfig parse_scheduler_config(const std::string& name, const nlohmann::json& given_args) {
  if (!given_args.is_object()) {
    throw InputError("ZEUS_PFO_SCHEDULER_ARGS: expected a JSON object, got " + given_args.dump());
  }
  const json args = with_lax_numbers(given_args);
  SchedulerConfig config;
  config.name = name;
  auto layout_from_args = [&] {
    if (!args.contains("microbatches")) {
      if (args.contains("schedule") || args.contains("chunks")) {
        throw InputError("ZEUS_PFO_SCHEDULER_ARGS: 'schedule' and 'chunks' need 'microbatches'");
      }
      return;
    }
    try {
      config.layout = parse_layout(args, "ZEUS_PFO_SCHEDULER_ARGS");
    } catch (const ApiError& e) {
      throw InputError(e.what());
    }
  };
  if (config.serves_point_plan()) {
    check_keys(args, name, {"solution_path", "plan", "deadline_s"});
    if (!args.contains("solution_path") || !args.at("solution_path").is_string()) {
      throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: {} needs {{\"solution_path\": \"freqs_pipeline_%05d.py\"}} "
                                   "or {{\"solution_path\": \"FRONTIER_DIR\", \"plan\": ROW or \"deadline_s\": S}}",
                                   name));
    }
    config.point_plan_path = args.at("solution_path").get<std::string>();
    if (std::filesystem::is_directory(config.point_plan_path)) {
      // A `perseus optimize` directory: one plan of its store, by row or by deadline.
      const FrontierIndex index = read_frontier_directory(config.point_plan_path);
      std::optional<std::size_t> row;
      if (args.contains("plan") == args.contains("deadline_s")) {
        throw InputError("ZEUS_PFO_SCHEDULER_ARGS: with a frontier directory, give one of \"plan\" (the row of "
                         "frontier.csv, 0: fastest) and \"deadline_s\"");
      }
      if (args.contains("plan")) {
        const json& plan = args.at("plan");
        if (!plan.is_number_unsigned() || plan.get<std::size_t>() >= index.entries.size()) {
          throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: 'plan' must be a row of {}'s frontier.csv, 0..{}",
                                       config.point_plan_path, index.entries.size() - 1));
        }
        row = plan.get<std::size_t>();
      } else {
        row = require_entry(index, positive_arg(args, "deadline_s"));
      }
      config.point_plan = index.frequencies(*row);
      config.point_plan_path = index.plan_name(*row);
    } else {
      if (args.contains("plan") || args.contains("deadline_s")) {
        throw InputError("ZEUS_PFO_SCHEDULER_ARGS: 'plan' and 'deadline_s' need a frontier directory as solution_path");
      }
      config.point_plan = read_point_plan_file(config.point_plan_path);
    }
  } else if (name == "InVivoProfiling") {
    check_keys(args, name,
               {"p_blocking", "unit_time", "schedule", "microbatches", "chunks", "max_energy_rises",
                "iterations_per_frequency", "exact_seconds"});
    if (!args.contains("p_blocking")) {
      throw InputError("ZEUS_PFO_SCHEDULER_ARGS: InVivoProfiling needs \"p_blocking\" (W; A100 83.64, A40 70.38)");
    }
    config.p_blocking = positive_arg(args, "p_blocking");
    if (args.contains("unit_time")) config.unit_time = positive_arg(args, "unit_time");
    if (args.contains("max_energy_rises")) {
      const json& rises = args.at("max_energy_rises");
      if (!rises.is_number_integer() || rises.get<long long>() < 0 || rises.get<long long>() > 1000) {
        throw InputError("ZEUS_PFO_SCHEDULER_ARGS: 'max_energy_rises' must be an integer in [0, 1000]");
      }
      config.profiling.max_energy_rises = rises.get<int>();
    }
    if (args.contains("iterations_per_frequency")) {
      const json& n = args.at("iterations_per_frequency");
      if (!n.is_number_integer() || n.get<long long>() < 1 || n.get<long long>() > 1000) {
        throw InputError("ZEUS_PFO_SCHEDULER_ARGS: 'iterations_per_frequency' must be an integer in [1, 1000]");
      }
      config.profiling.iterations_per_frequency = n.get<int>();
    }
    layout_from_args();
  } else if (name == "Frontier") {
    check_keys(args, name, {"p_blocking", "unit_time", "schedule", "microbatches", "chunks", "exact_seconds"});
    if (args.contains("p_blocking")) config.p_blocking = positive_arg(args, "p_blocking");
    if (args.contains("unit_time")) config.unit_time = positive_arg(args, "unit_time");
    layout_from_args();
  } else {
    throw InputError(fmt::format("ZEUS_PFO_SCHEDULER: unknown scheduler '{}' (known: PointSolution, "
                                 "PointSolution3D, InVivoProfiling, Frontier)",
                                 name));
  }
  if (args.contains("exact_seconds")) {
    const json& value = args.at("exact_seconds");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0 || value.get<double>() > 600) {
      throw InputError(fmt::format("ZEUS_PFO_SCHEDULER_ARGS: 'exact_seconds' must be a number of seconds in [0, 600], got {}",
                                   value.dump()));
    }
    config.exact_seconds = value.get<double>();
  }
  return config;
}

}  // namespace perseus::server
