// `perseus runs import` and `perseus runs validate`: measured runs (zeus dumps) read into a
// run table and a profile, and the prediction checked against them run by run.
#include <algorithm>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/model/statistics.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/runs/runs.hpp"
#include "perseus/runs/validate.hpp"

namespace perseus::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ImportArgs {
  std::string dir;
  std::string profile_out;
  std::string csv;
  bool json = false;
  bool force = false;
};

struct ValidateArgs {
  std::string dir;
  bool no_data_loading = false;
  bool no_remainder = false;
  double blocked_power = 83.64;
  std::string json_out;
  std::string csv;
  bool json = false;
  bool force = false;
  bool quiet = false;
};

std::pair<int, int> clock_range(const runs::Run& run) {
  int lo = 1 << 30, hi = 0;
  for (const auto& r : run.ranks)
    for (int c : r.clocks) lo = std::min(lo, c), hi = std::max(hi, c);
  return {lo, hi};
}

// Every rank's count of power states ("520/518/..."), and the ranks' load time summed.
std::pair<std::string, double> states_and_load(const runs::Run& run) {
  std::string states;
  double load = 0.0;
  for (const auto& r : run.ranks) {
    states += (states.empty() ? "" : "/") + std::to_string(r.power_states);
    load += r.load_s;
  }
  return {states, load};
}

void write_output(const std::string& path, bool force, const std::string& content, const std::string& input_dir) {
  check_replaceable_file(path, force, {input_dir});
  write_file_atomically(path, content);
}

void run_import(const ImportArgs& a) {
  const runs::RunTable table = runs::import_runs(a.dir);
  // Energy per entry from the energy model fitted on every run: power at the clock x time.
  const runs::EnergyFit fit = runs::fit_energy(table, -1);
  const auto entries = runs::profile_with_energy(table, -1);
  runs::to_profile(entries, a.dir);  // validates the profile as the planner would read it
  if (!a.profile_out.empty()) write_output(a.profile_out, a.force, runs::profile_csv(entries), a.dir);

  std::string csv = "run,ranks,power_states,min_clock_mhz,max_clock_mhz,iter_time_s,iter_energy_j,load_s\n";
  json rows = json::array();
  for (const auto& run : table.runs) {
    const auto [lo, hi] = clock_range(run);
    const auto [states, load] = states_and_load(run);
    csv += fmt::format("{},{},{},{},{},{:.6f},{:.3f},{:.6f}\n", run.id, run.ranks.size(), states, lo, hi,
                       run.iter_time_s(), run.iter_energy_j(), load);
    json ranks = json::array();
    for (const auto& r : run.ranks)
      ranks.push_back({{"rank", r.rank}, {"power_states", r.power_states}, {"iterations", r.iterations},
                       {"iter_time_s", r.iter_time_s}, {"iter_energy_j", r.iter_energy_j}, {"load_s", r.load_s}});
    rows.push_back({{"run", run.id}, {"min_clock_mhz", lo}, {"max_clock_mhz", hi}, {"iter_time_s", run.iter_time_s()},
                    {"iter_energy_j", run.iter_energy_j()}, {"ranks", ranks}});
  }
  if (!a.csv.empty()) write_output(a.csv, a.force, csv, a.dir);
  if (a.json) {
    std::cout << json{{"dir", a.dir}, {"stages", table.stages}, {"microbatches", table.microbatches},
                      {"profile_entries", entries.size()}, {"energy_fit_rms_residual", fit.rms_residual}, {"runs", rows}}
                     .dump(2)
              << "\n";
    return;
  }
  fmt::print("{}: {} runs, {} stages, {} microbatches; profile: {} (stage, instruction, clock) entries; "
             "energy fit residual {:.2f}% (rms)\n",
             a.dir, table.runs.size(), table.stages, table.microbatches, entries.size(), 100 * fit.rms_residual);
  fmt::print("{:>4}  {:>15}  {:>11}  {:>11}  {:>12}  {:>8}\n", "run", "power states", "clocks MHz", "iter time s",
             "energy J", "load s");
  for (const auto& run : table.runs) {
    const auto [lo, hi] = clock_range(run);
    const auto [states, load] = states_and_load(run);
    fmt::print("{:>4}  {:>15}  {:>11}  {:>11.3f}  {:>12.0f}  {:>8.3f}\n", run.id, states, fmt::format("{}-{}", lo, hi),
               run.iter_time_s(), run.iter_energy_j(), load);
  }
}

json validation_json(const runs::Validation& v, const std::string& dir) {
  json rows = json::array();
  for (const auto& p : v.runs)
    rows.push_back({{"run", p.id}, {"all_max", p.uniform_clock}, {"measured_time_s", p.measured_time_s},
                    {"predicted_time_s", p.predicted_time_s}, {"time_error", p.time_error()},
                    {"critical_path_s", p.critical_path_s}, {"remainder_s", p.remainder_s},
                    {"measured_energy_j", p.measured_energy_j}, {"predicted_energy_j", p.predicted_energy_j},
                    {"energy_error", p.energy_error()}});
  return {{"dir", dir},
          {"terms", {{"data_loading", v.options.data_loading}, {"remainder", v.options.remainder},
                     {"blocked_power_w", v.options.blocked_power_w}}},
          {"time_error", {{"median", v.median_time_error}, {"worst", v.worst_time_error}}},
          {"energy_error", {{"median", v.median_energy_error}, {"worst", v.worst_energy_error}}},
          {"energy_fit_rms_residual", v.median_fit_residual},
          {"runs", rows}};
}

double median_signed_time_error(const runs::Validation& v) {
  std::vector<double> errors;
  for (const auto& p : v.runs) errors.push_back(p.time_error());
  return median(std::move(errors));
}

// What each term of the prediction adds (docs/emulator.md, "Around the instructions"): the
// median signed time error with the terms switched on one after the other.
json term_steps(const runs::RunTable& table, const runs::ValidateOptions& options) {
  json steps = json::array();
  runs::ValidateOptions step = options;
  const std::pair<const char*, std::pair<bool, bool>> order[] = {
      {"instructions", {false, false}}, {"+ data loading", {true, false}}, {"+ remainder", {true, true}}};
  for (const auto& [name, terms] : order) {
    step.data_loading = terms.first;
    step.remainder = terms.second;
    const runs::Validation v = runs::validate(table, step);
    steps.push_back({{"terms", name}, {"median_time_error", median_signed_time_error(v)},
                     {"median_abs_time_error", v.median_time_error}, {"worst_abs_time_error", v.worst_time_error}});
  }
  return steps;
}

void run_validate(const ValidateArgs& a) {
  const runs::RunTable table = runs::import_runs(a.dir);
  runs::ValidateOptions options;
  options.data_loading = !a.no_data_loading;
  options.remainder = !a.no_remainder;
  options.blocked_power_w = a.blocked_power;
  const bool quiet = a.quiet || a.json;
  const runs::Validation v = runs::validate(table, options, [&](int done, int total) {
    if (!quiet && (done == total || done % 10 == 0)) fmt::print(stderr, "perseus: predicted {}/{} runs\n", done, total);
  });
  json out = validation_json(v, a.dir);
  out["term_steps"] = term_steps(table, options);
  if (!a.json_out.empty()) write_output(a.json_out, a.force, out.dump(2) + "\n", a.dir);
  if (!a.csv.empty()) {
    std::string csv = "run,all_max,measured_time_s,predicted_time_s,time_error,measured_energy_j,predicted_energy_j,energy_error\n";
    for (const auto& p : v.runs)
      csv += fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.3f},{:.3f},{:.6f}\n", p.id, p.uniform_clock ? 1 : 0,
                         p.measured_time_s, p.predicted_time_s, p.time_error(), p.measured_energy_j,
                         p.predicted_energy_j, p.energy_error());
    write_output(a.csv, a.force, csv, a.dir);
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{}: {} runs predicted leave-one-out (data loading {}, remainder {})\n", a.dir, v.runs.size(),
             options.data_loading ? "on" : "off", options.remainder ? "on" : "off");
  fmt::print("{:>4}  {:>10}  {:>10}  {:>7}  {:>10}  {:>10}  {:>7}\n", "run", "time s", "predicted", "error", "energy J",
             "predicted", "error");
  for (const auto& p : v.runs)
    fmt::print("{:>4}  {:>10.3f}  {:>10.3f}  {:>+6.2f}%  {:>10.0f}  {:>10.0f}  {:>+6.2f}%\n", p.id, p.measured_time_s,
               p.predicted_time_s, 100 * p.time_error(), p.measured_energy_j, p.predicted_energy_j,
               100 * p.energy_error());
  fmt::print("iteration time error: median {:.2f}%, worst {:.2f}%\n", 100 * v.median_time_error, 100 * v.worst_time_error);
  fmt::print("energy error:         median {:.2f}%, worst {:.2f}%  (energy fit residual {:.2f}% rms)\n",
             100 * v.median_energy_error, 100 * v.worst_energy_error, 100 * v.median_fit_residual);
  fmt::print("time error as terms are added (median signed / median abs / worst abs):\n");
  for (const json& step : out["term_steps"]) {
    fmt::print("  {:<16} {:>+6.2f}%  {:>5.2f}%  {:>5.2f}%\n", step["terms"].get<std::string>(),
               100 * step["median_time_error"].get<double>(), 100 * step["median_abs_time_error"].get<double>(),
               100 * step["worst_abs_time_error"].get<double>());
  }
}

}  // namespace

void add_runs_commands(CLI::App& app) {
  static ImportArgs import_args;
  static ValidateArgs validate_args;
  CLI::App* runs = app.add_subcommand("runs", "Measured training runs (zeus dumps): import them, check predictions");
  runs->require_subcommand(1);

  CLI::App* im = runs->add_subcommand("import", "Read a folder of <i>.sched.json / <i>.prof.json into a run table and a profile");
  im->footer("Example: perseus runs import data/measured/a100-pp4-gpt3-xl --profile-out gpt3.csv --csv runs.csv");
  im->add_option("dir", import_args.dir, "Folder of measured runs")->required();
  im->add_option("--profile-out", import_args.profile_out,
                 "Write the profile (stage,instruction,frequency,time,energy) built from every run");
  im->add_option("--csv", import_args.csv, "Write the run table as CSV");
  im->add_flag("--json", import_args.json, "Print the run table as JSON");
  im->add_flag("--force", import_args.force, "Replace existing output files");
  im->callback([] { run_import(import_args); });

  CLI::App* va = runs->add_subcommand("validate", "Predict every run from the others (leave-one-out); errors vs measured");
  va->footer("Each run's iteration time and energy predicted from a profile and energy model of the other runs. "
             "The emulator runs each plan (1F1B, profiled instruction times) with data loading on the first and "
             "last stage and the other runs' per-iteration remainder (optimizer step, p2p, gap) as time between "
             "iterations; the table at the end shows what each term adds "
             "(docs/emulator.md, \"Against measured runs\").\n"
             "Example: perseus runs validate data/measured/a100-pp4-bloom-3b --csv bloom.csv");
  va->add_option("dir", validate_args.dir, "Folder of measured runs")->required();
  va->add_flag("--no-data-loading", validate_args.no_data_loading, "Leave data loading out of the prediction");
  va->add_flag("--no-remainder", validate_args.no_remainder,
               "Leave the per-iteration remainder (optimizer step, p2p, gaps) out of the prediction");
  va->add_option("--blocked-power", validate_args.blocked_power,
                 "GPU power while blocked, W (A100 83.64); negative: fit it with the other coefficients")
      ->capture_default_str();
  va->add_option("--csv", validate_args.csv, "Write the per-run table as CSV");
  va->add_option("--json-out", validate_args.json_out, "Write the per-run table and summary as JSON");
  va->add_flag("--json", validate_args.json, "Print the table and summary as JSON");
  va->add_flag("--force", validate_args.force, "Replace existing output files");
  va->add_flag("-q,--quiet", validate_args.quiet, "No progress messages");
  va->callback([] { run_validate(validate_args); });
}

}  // namespace perseus::cli
