#include "perseus/server/scheduler_config.hpp"

#include <algorithm>
#include <cmath>
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

}  // namespace

SchedulerConfig parse_scheduler_config(const std::string& name, const nlohmann::json& args) {
  if (!args.is_object()) throw InputError("ZEUS_PFO_SCHEDULER_ARGS: expected a JSON object, got " + args.dump());
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
  if (name == "PointSolution") {
    check_keys(args, name, {"solution_path", "plan", "deadline_s"});
    if (!args.contains("solution_path") || !args.at("solution_path").is_string()) {
      throw InputError("ZEUS_PFO_SCHEDULER_ARGS: PointSolution needs {\"solution_path\": \"freqs_pipeline_%05d.py\"} "
                       "or {\"solution_path\": \"FRONTIER_DIR\", \"plan\": ROW or \"deadline_s\": S}");
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
      config.point_plan = read_freqs_pipeline(config.point_plan_path);  // parsed as data, never evaluated
    }
  } else if (name == "InVivoProfiling") {
    check_keys(args, name,
               {"p_blocking", "unit_time", "schedule", "microbatches", "chunks", "max_energy_rises",
                "iterations_per_frequency"});
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
    check_keys(args, name, {"p_blocking", "unit_time", "schedule", "microbatches", "chunks"});
    if (args.contains("p_blocking")) config.p_blocking = positive_arg(args, "p_blocking");
    if (args.contains("unit_time")) config.unit_time = positive_arg(args, "unit_time");
    layout_from_args();
  } else {
    throw InputError(fmt::format("ZEUS_PFO_SCHEDULER: unknown scheduler '{}' (known: PointSolution, "
                                 "InVivoProfiling, Frontier)",
                                 name));
  }
  return config;
}

}  // namespace perseus::server
