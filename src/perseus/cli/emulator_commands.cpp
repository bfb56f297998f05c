// `perseus emulate`, `perseus compare` and `perseus report`: what a plan does to a cluster,
// Perseus against the baselines, and the HTML page that shows both.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perseus/cli/commands.hpp"
#include "perseus/cli/progress.hpp"
#include "perseus/emulator/baselines.hpp"
#include "perseus/emulator/comparison.hpp"
#include "perseus/emulator/emulation_output.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/emulator/training_run.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/bundled_profiles.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/report/figures.hpp"
#include "perseus/report/geo_figures.hpp"
#include "perseus/report/html_report.hpp"
#include "perseus/report/image_export.hpp"
#include "perseus/report/plots.hpp"
#include "perseus/report/tables.hpp"
#include "perseus/report/trace.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus::cli {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- flags shared by the commands

struct ProblemArgs {
  std::string profile;
  std::string schedule = "1f1b";
  int stages = 0;
  int microbatches = 0;
  int chunks = 1;
  bool data_load = false;
  double p_blocking = 0.0;
  double unit_time = 0.001;
};

struct LinkArgs {
  double switch_latency = 0.0;
  int tensor_parallel = 1;
  double p2p_latency = 0.0;
  double p2p_bandwidth = 0.0;
  double activation_bytes = 0.0;
  double gradient_bytes = 0.0;
  std::vector<std::string> links;
  double allreduce_latency = 0.0;
  double allreduce_bandwidth = 0.0;
  double allreduce_bytes = 0.0;
  double switch_warning_fraction = kSwitchingWarningFraction;
  IterationOverheads overheads;
};

struct ProblemOptions {
  CLI::Option* profile = nullptr;
  CLI::Option* microbatches = nullptr;
  CLI::Option* p_blocking = nullptr;
  CLI::Option* unit_time = nullptr;
  CLI::Option* schedule = nullptr;
  CLI::Option* stages = nullptr;
  CLI::Option* chunks = nullptr;
};

ProblemOptions add_problem_flags(CLI::App* cmd, ProblemArgs& a, bool required) {
  ProblemOptions o;
  o.profile = cmd->add_option("--profile", a.profile, "Profile CSV (stage,instruction,frequency,time,energy)");
  o.schedule = cmd->add_option("--schedule", a.schedule, "1f1b, gpipe, interleaved-1f1b, 1f1b-recompute or interleaved-1f1b-recompute")
                   ->capture_default_str();
  o.stages = cmd->add_option("--stages", a.stages, "Pipeline stages S (default: the profile's)")
                 ->check(CLI::Range(1, limits::kMaxStages));
  o.microbatches = cmd->add_option("--microbatches", a.microbatches, "Microbatches M per iteration")
                       ->check(CLI::Range(1, limits::kMaxMicrobatches));
  o.chunks = cmd->add_option("--chunks", a.chunks, "Model chunks per device v (interleaved-1f1b)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, limits::kMaxChunks));
  cmd->add_flag("--data-load", a.data_load, "Add a data-loading operation (profile 'load' rows) per microbatch");
  o.p_blocking = cmd->add_option("--p-blocking", a.p_blocking, "GPU power while blocked, W (A100 83.64, A40 70.38)");
  o.unit_time = cmd->add_option("--unit-time", a.unit_time, "Time quantum tau of the solver, s (1e-3 A100, 1e-4 A40)")
                    ->capture_default_str();
  if (required) {
    o.profile->required();
    o.microbatches->required();
    o.p_blocking->required();
  }
  return o;
}

void add_link_flags(CLI::App* cmd, LinkArgs& a) {
  cmd->add_option("--switch-latency", a.switch_latency,
                  "Seconds a GPU clock change takes to apply (about 0.01 on NVIDIA GPUs)")
      ->capture_default_str();
  cmd->add_option("--tensor-parallel", a.tensor_parallel, "GPUs per stage T (they run in lockstep)")
      ->capture_default_str();
  cmd->add_option("--p2p-latency", a.p2p_latency, "Latency of the links between stages, s")->capture_default_str();
  cmd->add_option("--p2p-bandwidth", a.p2p_bandwidth, "Bandwidth of the links between stages, bytes/s (0: unlimited)")
      ->capture_default_str();
  cmd->add_option("--activation-bytes", a.activation_bytes, "Bytes a forward sends to the next stage")
      ->capture_default_str();
  cmd->add_option("--gradient-bytes", a.gradient_bytes, "Bytes a backward sends to the previous stage")
      ->capture_default_str();
  cmd->add_option("--switch-warning-fraction", a.switch_warning_fraction,
                  "Warn about late clock switches only when they cost more than this fraction of the iteration's "
                  "time or energy (0: any cost)")
      ->capture_default_str();
  cmd->add_option("--link", a.links, "A link of its own: FROM:TO:LATENCY[:BANDWIDTH] (stages, s, bytes/s); repeatable");
  cmd->add_option("--allreduce-latency", a.allreduce_latency, "Per-step latency of the gradient ring all-reduce, s")
      ->capture_default_str();
  cmd->add_option("--allreduce-bandwidth", a.allreduce_bandwidth, "Bandwidth of the all-reduce ring, bytes/s")
      ->capture_default_str();
  cmd->add_option("--allreduce-bytes", a.allreduce_bytes, "Gradient bytes of one stage to all-reduce")
      ->capture_default_str();
  // Around the instructions (docs/emulator.md): each off unless given.
  IterationOverheads& o = a.overheads;
  const std::string group = "Around the instructions (each off unless given)";
  cmd->add_option("--load-first", o.first_stage_load_s,
                  "Data loading per microbatch on the first stage, before each forward, s (GPU idle)")
      ->check(kNonNegative)
      ->group(group);
  cmd->add_option("--load-last", o.last_stage_load_s,
                  "Data loading per microbatch on the last stage (labels; all its loads together), s")
      ->check(kNonNegative)
      ->group(group);
  cmd->add_flag("--blocking-sends", o.blocking_sends,
                "A send holds its stage until the receiver has it (NCCL send/recv); with --p2p-latency set to the "
                "measured transfer time, point-to-point as measured")
      ->group(group);
  cmd->add_option("--optimizer-step", o.optimizer_step_s,
                  "The optimizer step on every GPU after the gradient all-reduce, s")
      ->check(kNonNegative)
      ->group(group);
  cmd->add_option("--optimizer-power", o.optimizer_power_w, "GPU power during the optimizer step, W (default: --p-blocking)")
      ->check(kNonNegative)
      ->group(group);
  cmd->add_option("--between-iterations", o.between_iterations_s,
                  "Idle time after the optimizer step before the next iteration, s")
      ->check(kNonNegative)
      ->group(group);
}

double parse_number(std::string_view text, const std::string& what) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw InputError(fmt::format("{}: '{}' is not a number", what, text));
  }
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t next = text.find(separator, at);
    parts.push_back(text.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return parts;
    at = next + 1;
  }
}

int parse_index(std::string_view text, const std::string& what) {
  const double value = parse_number(text, what);
  if (value != static_cast<int>(value)) throw InputError(fmt::format("{}: '{}' is not a whole number", what, text));
  return static_cast<int>(value);
}

EmulationConfig make_config(const LinkArgs& a) {
  EmulationConfig config;
  config.switch_latency_s = a.switch_latency;
  config.switching_warning_fraction = a.switch_warning_fraction;
  config.tensor_parallel = a.tensor_parallel;
  config.p2p = {a.p2p_latency, a.p2p_bandwidth};
  config.activation_bytes = a.activation_bytes;
  config.gradient_bytes = a.gradient_bytes;
  config.allreduce = {a.allreduce_latency, a.allreduce_bandwidth};
  config.allreduce_bytes = a.allreduce_bytes;
  config.overheads = a.overheads;
  for (const std::string& link : a.links) {
    const auto parts = split(link, ':');
    const std::string what = "--link " + link;
    if (parts.size() < 3 || parts.size() > 4) throw InputError(what + ": expected FROM:TO:LATENCY[:BANDWIDTH]");
    config.p2p_links[{parse_index(parts[0], what), parse_index(parts[1], what)}] = {
        parse_number(parts[2], what), parts.size() == 4 ? parse_number(parts[3], what) : 0.0};
  }
  return config;
}

Straggler parse_straggler(const std::string& text) {
  const auto parts = split(text, ':');
  const std::string what = "--straggler " + text;
  if (parts.size() < 2 || parts.size() > 3) throw InputError(what + ": expected PIPELINE:SLOWDOWN[:DELAY]");
  return {parse_index(parts[0], what), parse_number(parts[1], what), parts.size() == 3 ? parse_number(parts[2], what) : 0.0};
}

void print_warnings(const std::vector<Warning>& warnings) {
  for (const Warning& w : warnings) fmt::print(stderr, "perseus: warning: {}\n", w.message);
}

struct Loaded {
  Profile profile;
  EnergyProblem problem;
};

// What the flags ask to solve; the profile's stages unless --stages.
SolveRequest solve_request(const ProblemArgs& a) {
  if (a.profile.empty()) throw InputError("give --profile");
  if (a.microbatches == 0) throw InputError("give --microbatches");
  if (a.microbatches < 1) throw InputError(fmt::format("--microbatches must be >= 1, not {}", a.microbatches));
  SolveRequest request;
  request.schedule = {parse_schedule_kind(a.schedule), a.stages, a.microbatches, a.chunks, a.data_load};
  request.options = {a.unit_time, a.p_blocking, {}};
  return request;
}

// The problem a plan runs on: the profile's measured options, bound to the schedule. Running
// a plan needs no cost fits (only solving does), so none are made: a profile whose options
// admit no fit still emulates.
Loaded load_problem(const ProblemArgs& a) {
  SolveRequest request = solve_request(a);
  request.options.fit_costs = false;
  Profile profile = Profile::read_csv(a.profile);
  ScheduleSpec spec;
  std::vector<Warning> warnings;
  EnergyProblem problem = make_problem(profile, request, &spec, &warnings);
  print_warnings(warnings);
  return {std::move(profile), std::move(problem)};
}

std::string schedule_text(const EnergyProblem& problem, const ProblemArgs& a) {
  return fmt::format("{} {} stages x {} microbatches{}", a.schedule, problem.dag.num_stages(), a.microbatches,
                     a.chunks > 1 ? fmt::format(" x {} chunks", a.chunks) : "");
}

template <typename Write>
std::string to_text(Write&& write) {
  std::ostringstream out;
  write(out);
  return out.str();
}

using Progress = std::function<void(const std::string&)>;
Progress progress_printer(bool quiet) {
  if (quiet) return nullptr;
  return [](const std::string& message) { fmt::print(stderr, "perseus: {}\n", message); };
}

// ---------------------------------------------------------------- plans from files

// ---------------------------------------------------------------- perseus emulate

struct EmulateArgs {
  ProblemArgs problem;
  LinkArgs links;
  int data_parallel = 1;
  std::vector<std::string> stragglers;
  std::string plan;
  std::string straggler_plan;
  std::string frontier;
  double deadline = 0.0;
  bool respond = false;
  std::string baseline;
  bool interpolate = false;
  std::string out;
  bool force = false;
  bool per_gpu = false;
  int timeline_pipeline = 0;
  std::string trace = "notable";
  bool json = false;
  bool quiet = false;
  // Several iterations with drawn stragglers (training_run.hpp), noise, the power curve.
  int iterations = 1;
  std::string straggler_slowdown;  // MIN[:MAX]
  double straggler_probability = 1.0;
  std::string straggler_placement = "random";
  int straggler_pipeline = 0;
  int straggler_move_every = 1;
  double noise = 0.0;
  std::uint64_t seed = 1;
  double power_sample = 0.0;
};

// Defaults for the problem flags from a frontier directory's summary.json.
void defaults_from_frontier(EmulateArgs& a, const FrontierIndex& index, const ProblemOptions& given) {
  const nlohmann::json& s = index.summary;
  try {
    if (!given.profile->count()) a.problem.profile = s.at("profile").get<std::string>();
    const nlohmann::json& schedule = s.at("schedule");
    if (!given.schedule->count()) a.problem.schedule = schedule.at("kind").get<std::string>();
    if (!given.stages->count()) a.problem.stages = schedule.at("stages").get<int>();
    if (!given.microbatches->count()) a.problem.microbatches = schedule.at("microbatches").get<int>();
    if (!given.chunks->count()) a.problem.chunks = schedule.at("chunks").get<int>();
    if (!given.p_blocking->count()) a.problem.p_blocking = s.at("p_blocking_w").get<double>();
    if (!given.unit_time->count()) a.problem.unit_time = s.at("unit_time_s").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: summary.json lacks what this needs ({}); give the flags yourself",
                                 a.frontier, e.what()));
  }
}

ExecutionPlan baseline_plan(const EnergyProblem& problem, const std::string& name,
                            const std::shared_ptr<const FrequencyTable>& clocks, bool interpolate) {
  if (name == "allmax") return plan_from_clocks(problem, all_max(problem, *clocks).clock_mhz, clocks);
  if (name == "envpipe") return plan_from_clocks(problem, envpipe(problem, *clocks).clock_mhz, clocks);
  if (name.rfind("zeus-global:", 0) == 0) {
    const int f = parse_index(std::string_view(name).substr(12), "--baseline " + name);
    try {
      return zeus_global_plan(problem, clocks, f, interpolate);
    } catch (const InputError& e) {
      throw InputError(fmt::format("--baseline {}: {}", name, e.what()));
    }
  }
  throw InputError("--baseline: expected allmax, envpipe or zeus-global:MHZ, not '" + name + "'");
}

void print_emulation(const EmulationResult& r, const std::string& plan_name) {
  fmt::print("Plan: {}\n", plan_name);
  fmt::print("Cluster: {} pipelines x {} stages x TP {} = {} GPUs\n", r.data_parallel, r.stages, r.tensor_parallel,
             r.num_gpus());
  const IterationOverheads& o = r.overheads;
  const double after = r.iteration_time_s - r.communication_end_s;
  fmt::print("Iteration time: {:.6f} s (slowest pipeline {:.6f} s, then the gradient all-reduce{})\n", r.iteration_time_s,
             r.sync_time_s,
             after > 0.0 ? fmt::format(", then optimizer step {:g} s and gap {:g} s", o.optimizer_step_s,
                                       o.between_iterations_s)
                         : "");
  if (o.first_stage_load_s > 0.0 || o.last_stage_load_s > 0.0 || o.blocking_sends) {
    fmt::print("Inside the pipeline: data loading {:g} s (first stage) and {:g} s (last stage) per microbatch{}\n",
               o.first_stage_load_s, o.last_stage_load_s, o.blocking_sends ? ", blocking sends" : "");
  }
  const EnergySplit& e = r.energy;
  fmt::print("Energy: {:.1f} J = computation {:.1f} + intrinsic blocking {:.1f} + extrinsic blocking {:.1f} + "
             "all-reduce {:.1f}{}\n",
             e.total_j(), e.computation_j, e.intrinsic_blocking_j, e.extrinsic_blocking_j, e.allreduce_j,
             e.overhead_j > 0.0 ? fmt::format(" + optimizer step and gap {:.1f}", e.overhead_j) : "");
  fmt::print("Average power: {:.1f} W ({:.1f} W per GPU)\n", r.average_power_w(), r.average_power_per_gpu_w());
  fmt::print("Clock switches: {} ({} late, {} missed)\n", r.switches, r.late_switches, r.missed_switches);
  const std::size_t shown = std::min<std::size_t>(r.pipelines.size(), 4);
  for (const PipelineSummary& p : r.pipelines) {
    if (p.pipeline >= static_cast<int>(shown) && !p.straggler) continue;
    fmt::print("  pipeline {:>4}{}: {:.6f} s, {:.1f} J\n", p.pipeline,
               p.straggler ? fmt::format(" (straggler x{:g}, +{:g} s)", p.slowdown, p.delay_s) : "", p.time_s,
               p.energy.total_j());
  }
  if (r.pipelines.size() > shown) fmt::print("  ... ({} pipelines in all)\n", r.pipelines.size());
  if (r.data_parallel > 1) {
    fmt::print("Fastest pipeline: {} ({:.6f} s); typical: {}\n", r.fastest_pipeline,
               r.pipelines[static_cast<std::size_t>(r.fastest_pipeline)].time_s, r.typical_pipeline);
  }
}

// Which pipelines keep their timeline: none without --out (only the summary is printed);
// with it, the notable ones and the one timeline.svg draws, or every one with --trace all.
void set_detail(EmulationConfig& config, const EmulateArgs& a) {
  if (a.trace != "notable" && a.trace != "all") {
    throw InputError(fmt::format("--trace: expected notable or all, not '{}'", a.trace));
  }
  config.detail = TimelineDetail::kListed;
  if (a.out.empty()) return;
  if (a.data_parallel >= 1 && (a.timeline_pipeline < 0 || a.timeline_pipeline >= a.data_parallel)) {
    throw InputError(fmt::format("--timeline-pipeline {}: there are {} pipelines (0..{})", a.timeline_pipeline,
                                 a.data_parallel, a.data_parallel - 1));
  }
  config.detail = a.trace == "all" ? TimelineDetail::kAll : TimelineDetail::kNotable;
  config.detail_pipelines = {a.timeline_pipeline};
}

// The pipelines with a timeline, and why: "pipelines 0 (fastest, typical), 64 (straggler)".
std::string detailed_text(const EmulationResult& r) {
  if (r.detail == TimelineDetail::kAll) return fmt::format("all {} pipelines", r.data_parallel);
  std::vector<std::string> parts;
  for (const int p : r.detailed_pipelines) {
    const auto reasons = notable_reasons(r, p);
    parts.push_back(reasons.empty() ? std::to_string(p) : fmt::format("{} ({})", p, fmt::join(reasons, ", ")));
  }
  return fmt::format("pipelines {}", fmt::join(parts, ", "));
}

// Every plan a frontier directory holds, as Perseus's candidates; warns when --max-plans left some out.
std::pair<std::vector<ExecutionPlan>, std::vector<std::string>> frontier_candidates(
    const FrontierIndex& index, const std::string& dir, const EnergyProblem& problem,
    const std::shared_ptr<const FrequencyTable>& clocks, bool interpolate) {
  const std::size_t with_plan = index.plans();
  if (with_plan < index.entries.size()) {
    // T_opt is chosen among the plans there are: with some thinned out (--max-plans), the
    // choice is coarser than the frontier and the energy higher than Perseus's.
    fmt::print(stderr,
               "perseus: warning: {} holds plans for {} of its {} frontier points (written with --max-plans): "
               "the straggler's answer chooses among those only\n",
               dir, with_plan, index.entries.size());
  }
  std::vector<ExecutionPlan> candidates;
  std::vector<std::string> names;
  for (std::size_t row = 0; row < index.entries.size(); ++row) {
    if (!index.has_plan(row)) continue;
    candidates.push_back(plan_from_frequencies(problem, index.frequencies(row), clocks, interpolate));
    names.push_back(index.plan_name(row));
  }
  return {std::move(candidates), std::move(names)};
}

bool is_training_run(const EmulateArgs& a) { return a.iterations > 1 || !a.straggler_slowdown.empty(); }

TrainingRunConfig training_run_config(const EmulateArgs& a) {
  TrainingRunConfig run;
  run.iterations = a.iterations;
  run.seed = a.seed;
  StragglerModel& m = run.stragglers;
  m.probability = a.straggler_probability;
  if (!a.straggler_slowdown.empty()) {
    const auto parts = split(a.straggler_slowdown, ':');
    const std::string what = "--straggler-slowdown " + a.straggler_slowdown;
    if (parts.size() > 2) throw InputError(what + ": expected MIN[:MAX]");
    m.slowdown_min = parse_number(parts[0], what);
    m.slowdown_max = parts.size() == 2 ? parse_number(parts[1], what) : m.slowdown_min;
  }
  if (a.straggler_placement == "random") m.placement = StragglerPlacement::kRandom;
  else if (a.straggler_placement == "moving") m.placement = StragglerPlacement::kMoving;
  else if (a.straggler_placement == "fixed") m.placement = StragglerPlacement::kFixed;
  else throw InputError("--straggler-placement: expected random, moving or fixed, not '" + a.straggler_placement + "'");
  m.pipeline = a.straggler_pipeline;
  m.move_every = a.straggler_move_every;
  return run;
}

nlohmann::json figures_json(const RunFigures& f) { return {{"time_s", f.time_s}, {"energy_j", f.energy_j}}; }

nlohmann::json training_run_json(const TrainingRunResult& r, const TrainingRunConfig& run,
                                 const std::vector<std::string>& names, const std::string& baseline) {
  nlohmann::json iterations = nlohmann::json::array();
  for (const IterationOutcome& k : r.iterations) {
    iterations.push_back({{"iteration", k.iteration},
                          {"straggler", k.straggler < 0 ? nlohmann::json() : nlohmann::json(k.straggler)},
                          {"slowdown", k.slowdown},
                          {"straggler_time_s", k.straggler_time_s},
                          {"chosen_plan", names[k.chosen_plan]},
                          {"perseus", figures_json(k.perseus)},
                          {"fastest_everywhere", figures_json(k.fastest_everywhere)},
                          {"baseline", figures_json(k.baseline)}});
  }
  const StragglerModel& m = run.stragglers;
  return {{"schema", "perseus.training_run/1"},
          {"iterations", run.iterations},
          {"seed", run.seed},
          {"stragglers",
           {{"probability", m.probability},
            {"slowdown_min", m.slowdown_min},
            {"slowdown_max", m.slowdown_max},
            {"placement", to_string(m.placement)},
            {"pipeline", m.pipeline},
            {"move_every", m.move_every}}},
          {"baseline_plan", baseline},
          {"fastest_plan", names[r.fastest_plan]},
          {"t_star_s", r.t_star_s},
          {"totals",
           {{"perseus", figures_json(r.perseus)},
            {"fastest_everywhere", figures_json(r.fastest_everywhere)},
            {"baseline", figures_json(r.baseline)}}},
          {"savings_vs_baseline", r.savings()},
          {"savings_vs_fastest_everywhere", r.straggler_savings()},
          {"per_iteration", iterations}};
}

std::string power_csv(const TrainingRunResult& r) {
  std::string out = "run,iteration,start_s,duration_s,power_w\n";
  for (const auto& [name, curve] : {std::pair{"perseus", &r.perseus_power}, std::pair{"baseline", &r.baseline_power}}) {
    for (const PowerSample& s : *curve) {
      out += fmt::format("{},{},{:.6f},{:.6f},{:.3f}\n", name, s.iteration, s.start_s, s.duration_s, s.power_w);
    }
  }
  return out;
}

// perseus emulate --iterations N / --straggler-slowdown: several iterations, drawn stragglers.
void run_training(const EmulateArgs& a, const EnergyProblem& problem, const std::optional<FrontierIndex>& index,
                  const std::shared_ptr<const FrequencyTable>& clocks, EmulationConfig config, const Progress& progress) {
  if (!index) throw InputError("several iterations with drawn stragglers need Perseus's plans: give --frontier DIR");
  if (!a.stragglers.empty()) {
    throw InputError("--straggler names one straggler for one iteration; with --iterations the stragglers are drawn "
                     "(--straggler-slowdown, --straggler-probability, --straggler-placement)");
  }
  if (a.respond || !a.plan.empty() || !a.straggler_plan.empty() || a.deadline != 0.0) {
    throw InputError("with --iterations Perseus answers every iteration's straggler itself: leave out --respond, "
                     "--plan, --straggler-plan and --deadline");
  }
  const TrainingRunConfig run = training_run_config(a);
  const auto [candidates, names] = frontier_candidates(*index, a.frontier, problem, clocks, a.interpolate);
  const std::string baseline_name = a.baseline.empty() ? "allmax" : a.baseline;
  const ExecutionPlan baseline = baseline_plan(problem, baseline_name, clocks, a.interpolate);
  config.detail = TimelineDetail::kListed;
  config.record_transfers = false;
  if (progress) {
    progress(fmt::format("emulating {} iterations of {} pipelines ({} frontier plans, against {})", run.iterations,
                         config.data_parallel, candidates.size(), baseline_name));
  }
  const TrainingRunResult r = emulate_training_run(problem, candidates, baseline, config, run, [&](int done, int total) {
    if (progress && (done == total || done % std::max(1, total / 10) == 0)) {
      progress(fmt::format("iteration {}/{}", done, total));
    }
  });
  const nlohmann::json out = training_run_json(r, run, names, baseline_name);
  if (!a.out.empty()) {
    std::string csv = "iteration,straggler,slowdown,straggler_time_s,chosen_plan,perseus_time_s,perseus_energy_j,"
                      "fastest_time_s,fastest_energy_j,baseline_time_s,baseline_energy_j\n";
    for (const IterationOutcome& k : r.iterations) {
      csv += fmt::format("{},{},{:.4f},{:.6f},{},{:.6f},{:.3f},{:.6f},{:.3f},{:.6f},{:.3f}\n", k.iteration,
                         k.straggler < 0 ? std::string() : std::to_string(k.straggler), k.slowdown, k.straggler_time_s,
                         names[k.chosen_plan], k.perseus.time_s, k.perseus.energy_j, k.fastest_everywhere.time_s,
                         k.fastest_everywhere.energy_j, k.baseline.time_s, k.baseline.energy_j);
    }
    std::vector<std::pair<std::string, std::string>> files = {{"run.json", out.dump(1) + "\n"}, {"iterations.csv", csv}};
    if (config.power_sample_s > 0.0) files.emplace_back("power.csv", power_csv(r));
    write_directory_atomically(a.out, a.force, files, {a.problem.profile, a.frontier});
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  const StragglerModel& m = run.stragglers;
  fmt::print("Training run: {} iterations of {} pipelines x {} stages x TP {}; seed {}\n", run.iterations,
             config.data_parallel, problem.dag.num_stages(), config.tensor_parallel, run.seed);
  fmt::print("Stragglers: probability {:g} per iteration, slowdown {:g}..{:g}, {} placement{}; instruction noise {:g}\n",
             m.probability, m.slowdown_min, m.slowdown_max, to_string(m.placement),
             m.placement == StragglerPlacement::kRandom ? std::string()
                                                        : fmt::format(" from pipeline {}", m.pipeline),
             config.instruction_noise);
  fmt::print("{:>5}  {:>9}  {:>8}  {:>10}  {:>10}  {:>12}  {:>12}  {:>12}\n", "iter", "straggler", "slowdown", "T' s",
             "time s", "Perseus J", "fastest J", baseline_name + " J");
  const std::size_t shown = std::min<std::size_t>(r.iterations.size(), 20);
  for (std::size_t i = 0; i < shown; ++i) {
    const IterationOutcome& k = r.iterations[i];
    fmt::print("{:>5}  {:>9}  {:>8.3f}  {:>10.4f}  {:>10.4f}  {:>12.1f}  {:>12.1f}  {:>12.1f}\n", k.iteration,
               k.straggler < 0 ? std::string("-") : std::to_string(k.straggler), k.slowdown, k.straggler_time_s,
               k.perseus.time_s, k.perseus.energy_j, k.fastest_everywhere.energy_j, k.baseline.energy_j);
  }
  if (r.iterations.size() > shown) fmt::print("  ... ({} iterations in all)\n", r.iterations.size());
  fmt::print("Total: Perseus {:.3f} s, {:.1f} J; fastest plan everywhere {:.3f} s, {:.1f} J; {} {:.3f} s, {:.1f} J\n",
             r.perseus.time_s, r.perseus.energy_j, r.fastest_everywhere.time_s, r.fastest_everywhere.energy_j,
             baseline_name, r.baseline.time_s, r.baseline.energy_j);
  fmt::print("Perseus saves {:.2f}% of {}'s energy ({:.2f}% of its fastest plan's by answering the stragglers)\n",
             100 * r.savings(), baseline_name, 100 * r.straggler_savings());
  if (!a.out.empty()) {
    fmt::print("Wrote {}/{{run.json, iterations.csv{}}}\n", a.out, config.power_sample_s > 0.0 ? ", power.csv" : "");
  }
}

void run_emulate(EmulateArgs a, const ProblemOptions& given) {
  const Progress progress = progress_printer(a.quiet);
  const int sources = !a.plan.empty() + !a.frontier.empty() + !a.baseline.empty();
  if (sources > 1 && !is_training_run(a)) throw InputError("give one of --plan, --frontier and --baseline");
  std::optional<FrontierIndex> index;
  if (!a.frontier.empty()) {
    index = read_frontier_directory(a.frontier);
    defaults_from_frontier(a, *index, given);
  }
  if (a.problem.p_blocking <= 0.0 && !given.p_blocking->count()) throw InputError("give --p-blocking");
  if (!a.out.empty()) check_output_directory(a.out, a.force, {a.problem.profile, a.frontier});
  const Loaded loaded = load_problem(a.problem);
  const EnergyProblem& problem = loaded.problem;
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, loaded.profile));

  EmulationConfig config = make_config(a.links);
  config.data_parallel = a.data_parallel;
  for (const std::string& s : a.stragglers) config.stragglers.push_back(parse_straggler(s));
  config.record_transfers = true;
  config.instruction_noise = a.noise;
  config.noise_seed = a.seed;
  config.power_sample_s = a.power_sample;
  if (is_training_run(a)) return run_training(a, problem, index, clocks, config, progress);
  set_detail(config, a);

  std::string plan_name;
  EmulationResult result;
  std::optional<ExecutionPlan> straggler_plan;
  if (!a.straggler_plan.empty()) {
    straggler_plan = plan_from_frequencies(problem, read_plan_file(a.straggler_plan), clocks, a.interpolate);
  }
  if (index && a.respond) {
    if (config.stragglers.empty()) throw InputError("--respond needs at least one --straggler");
    const auto [candidates, names] = frontier_candidates(*index, a.frontier, problem, clocks, a.interpolate);
    if (progress) progress(fmt::format("emulating {} frontier plans to answer the straggler", candidates.size()));
    StragglerResponse response = emulate_straggler_response(problem, candidates, config);
    plan_name = fmt::format("{} (T' = {:.6f} s, T* = {:.6f} s, T_opt = {:.6f} s; stragglers run {})",
                            names[response.chosen_plan], response.straggler_time_s, response.t_star_s, response.t_opt_s,
                            names[response.straggler_plan]);
    result = std::move(response.result);
  } else {
    ExecutionPlan plan;
    if (index) {
      const double deadline = a.deadline != 0.0 ? a.deadline : index->entries.front().time_s;
      const std::size_t row = require_entry(*index, deadline);
      plan_name = index->plan_name(row);
      plan = plan_from_frequencies(problem, index->frequencies(row), clocks, a.interpolate);
    } else if (!a.plan.empty()) {
      plan_name = a.plan;
      plan = plan_from_frequencies(problem, read_plan_file(a.plan), clocks, a.interpolate);
    } else {
      plan_name = a.baseline.empty() ? "allmax" : a.baseline;
      plan = baseline_plan(problem, plan_name, clocks, a.interpolate);
    }
    if (progress && config.data_parallel > 8) {
      progress(fmt::format("emulating {} pipelines ({} GPUs)", config.data_parallel,
                           config.data_parallel * problem.dag.num_stages() * config.tensor_parallel));
    }
    result = emulate(problem, plan, config, straggler_plan ? &*straggler_plan : nullptr);
  }
  for (const std::string& w : result.warnings) fmt::print(stderr, "perseus: warning: {}\n", w);

  if (!a.out.empty()) {
    if (progress) progress("writing " + a.out);
    report::TimelinePlotOptions timeline;
    timeline.pipeline = a.timeline_pipeline;
    timeline.title = fmt::format("pipeline {} of {}", a.timeline_pipeline, plan_name);
    // Streamed into the staging directory: at --trace all on 131,072 GPUs the files hold
    // hundreds of MB, which need not be in memory at once.
    write_directory_atomically(a.out, a.force, [&](const fs::path& staging) {
      const auto write = [&](const std::string& name, const std::function<void(std::ostream&)>& fill) {
        std::ofstream file(staging / name, std::ios::binary);
        if (file) fill(file);
        file.flush();
        if (!file) throw InputError(fmt::format("{}: cannot write {}", a.out, name));
      };
      write("emulation.json", [&](std::ostream& o) { write_emulation_json(o, result); });
      write("devices.csv", [&](std::ostream& o) { write_devices_csv(o, result); });
      write("timeline.csv", [&](std::ostream& o) { write_timeline_csv(o, result, a.per_gpu); });
      write("trace.json", [&](std::ostream& o) { report::write_chrome_trace(o, result); });
      write("timeline.svg", [&](std::ostream& o) { o << report::timeline_svg(result, timeline); });
      if (!result.power_w.empty()) {
        write("power.csv", [&](std::ostream& o) {
          o << "start_s,duration_s,power_w\n";
          for (std::size_t i = 0; i < result.power_w.size(); ++i) {
            o << fmt::format("{:.6f},{:.6f},{:.3f}\n", static_cast<double>(i) * result.power_sample_s,
                             result.power_sample_duration_s(i), result.power_w[i]);
          }
        });
      }
      fs::create_directory(staging / "pipelines");
      for (const int p : result.detailed_pipelines) {
        write(pipeline_file_name(p), [&](std::ostream& o) { write_pipeline_json(o, result, p); });
      }
    }, {a.problem.profile, a.plan, a.straggler_plan, a.frontier});
  }
  if (a.json) {
    nlohmann::json summary = emulation_to_json(result);
    summary["plan"] = plan_name;
    if (!a.out.empty()) summary["out"] = a.out;
    std::cout << summary.dump(2) << "\n";
    return;
  }
  print_emulation(result, plan_name);
  if (!a.out.empty()) {
    fmt::print("Wrote {}/{{emulation.json, devices.csv, timeline.csv, trace.json, timeline.svg, pipelines/}}\n", a.out);
    fmt::print("Timelines of {}{}\n", detailed_text(result),
               a.trace == "all" ? "" : "; --trace all writes every pipeline's");
  }
}

// ---------------------------------------------------------------- perseus compare / report

struct CompareArgs {
  ProblemArgs problem;
  LinkArgs links;
  int data_parallel = 2;
  std::vector<double> ratios = {1.05, 1.1, 1.2, 1.3, 1.4, 1.5};
  bool large_scale = false;
  std::vector<std::string> large_scale_profiles;
  std::vector<int> large_scale_microbatches = {12, 24, 48, 96};
  int global_microbatches = 1536;
  int large_scale_tensor_parallel = 8;
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

struct Solved {
  Profile profile;
  Solution solution;
  Comparison comparison;
};

Solved solve_and_compare(const CompareArgs& a, const Progress& progress) {
  SolveRequest request = solve_request(a.problem);
  Profile profile = Profile::read_csv(a.problem.profile);
  if (progress) request.progress = solve_progress_printer();
  Solution solution = solve(profile, request);
  Solved out{std::move(profile), std::move(solution), {}};
  print_warnings(out.solution.warnings);
  const EnergyProblem& problem = out.solution.problem;
  ComparisonOptions options;
  options.clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, out.profile));
  options.emulation = make_config(a.links);
  options.emulation.data_parallel = a.data_parallel;
  options.straggler_ratios = a.ratios;
  options.progress = progress;
  out.comparison = compare_methods(problem, out.solution.frontier, options);
  return out;
}

struct LargeScaleProfile {
  std::string path;
  OptionsConfig config;
};

// The profiles of the large-scale table: each --large-scale-profile, with the main
// comparison's p_blocking and unit time unless given as PATH:P_BLOCKING:UNIT_TIME; without
// any, the four bundled ones at their reference settings.
std::vector<LargeScaleProfile> large_scale_profiles(const CompareArgs& a) {
  std::vector<LargeScaleProfile> profiles;
  if (a.large_scale_profiles.empty()) {
    fs::path dir;
    try {
      dir = find_bundled_profiles_dir();
    } catch (const InputError& e) {
      throw InputError(fmt::format("--large-scale: {}; run from the perseus checkout, or give each profile as "
                                   "--large-scale-profile PATH:P_BLOCKING:UNIT_TIME "
                                   "(e.g. data/profiles/bloom-176b+a100-sxm.csv:83.64:0.001)",
                                   e.what()));
    }
    for (const BundledProfile& b : kBundledProfiles) {
      profiles.push_back({(dir / (std::string(b.name) + ".csv")).string(), OptionsConfig{b.unit_time, b.p_blocking, {}}});
    }
    return profiles;
  }
  for (const std::string& spec : a.large_scale_profiles) {
    const auto parts = split(spec, ':');
    if (parts.size() != 1 && parts.size() != 3) {
      throw InputError("--large-scale-profile " + spec + ": expected PATH or PATH:P_BLOCKING:UNIT_TIME");
    }
    const std::string what = "--large-scale-profile " + spec;
    profiles.push_back({std::string(parts[0]),
                        OptionsConfig{parts.size() == 3 ? parse_number(parts[2], what) : a.problem.unit_time,
                                      parts.size() == 3 ? parse_number(parts[1], what) : a.problem.p_blocking,
                                      {}}});
  }
  return profiles;
}

std::vector<LargeScaleRow> large_scale_rows(const CompareArgs& a, const std::vector<LargeScaleProfile>& profiles,
                                            const Progress& progress) {
  LargeScaleOptions options;
  options.tensor_parallel = a.large_scale_tensor_parallel;
  options.global_microbatches = a.global_microbatches;
  options.emulation = make_config(a.links);
  options.progress = progress;
  std::vector<LargeScaleRow> rows;
  for (const auto& [path, config] : profiles) {
    const Profile profile = Profile::read_csv(path);
    options.stages = profile.num_stages();
    for (int m : a.large_scale_microbatches) {
      rows.push_back(large_scale_row(profile, fs::path(path).stem().string(), m, config, options));
    }
  }
  return rows;
}

void add_compare_flags(CLI::App* cmd, CompareArgs& a) {
  add_link_flags(cmd, a.links);
  cmd->add_option("--data-parallel", a.data_parallel, "Pipelines in the straggler table's cluster (>= 2; the last straggles)")
      ->capture_default_str();
  cmd->add_option("--straggler-ratios", a.ratios, "T'/T values of the straggler table")->delimiter(',')->capture_default_str();
  cmd->add_flag("--large-scale", a.large_scale,
                "Add the large-scale table (solves one frontier per profile and microbatch count; about 25 s for "
                "the four bundled profiles, mostly the A40s at 96 microbatches)");
  cmd->add_option("--large-scale-profile", a.large_scale_profiles,
                  "Profiles of the large-scale table, PATH or PATH:P_BLOCKING:UNIT_TIME (default: the four bundled "
                  "data/profiles/{bloom-176b,gpt3-175b}+{a100-sxm,a40}.csv at 83.64 W/1 ms and 70.38 W/0.1 ms); "
                  "repeatable");
  cmd->add_option("--large-scale-microbatches", a.large_scale_microbatches, "Microbatch counts of the large-scale table")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--global-microbatches", a.global_microbatches,
                  "Microbatches per iteration of the whole cluster (pipelines = this / M)")
      ->capture_default_str();
  cmd->add_option("--large-scale-tensor-parallel", a.large_scale_tensor_parallel, "GPUs per stage in the large-scale table")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", a.quiet, "No progress messages");
}

void run_compare(const CompareArgs& a) {
  const Progress progress = progress_printer(a.quiet);
  // Found first: a missing bundled profile is an error before minutes of solving.
  const auto large = a.large_scale ? large_scale_profiles(a) : std::vector<LargeScaleProfile>{};
  if (!a.out.empty()) check_output_directory(a.out, a.force, {a.problem.profile});  // not after minutes of solving
  const Solved solved = solve_and_compare(a, progress);
  const Comparison& c = solved.comparison;
  const std::vector<LargeScaleRow> rows = large_scale_rows(a, large, progress);
  nlohmann::json json = report::comparison_to_json(c);
  json["profile"] = a.problem.profile;
  json["schedule"] = schedule_text(solved.solution.problem, a.problem);
  json["frontier_points"] = solved.solution.frontier.points.size();
  json["solve_s"] = solved.solution.solve_seconds();
  if (!rows.empty()) json["large_scale"] = report::large_scale_to_json(rows);
  if (!a.out.empty()) {
    std::vector<std::pair<std::string, std::string>> files = {
        {"comparison.json", json.dump(2) + "\n"},
        {"methods.csv", to_text([&](std::ostream& o) { report::write_methods_csv(o, c); })},
        {"stragglers.csv", to_text([&](std::ostream& o) { report::write_stragglers_csv(o, c); })},
        {"points.csv", to_text([&](std::ostream& o) { report::write_points_csv(o, c); })},
    };
    if (!rows.empty()) {
      files.emplace_back("large_scale.csv", to_text([&](std::ostream& o) { report::write_large_scale_csv(o, rows); }));
    }
    write_directory_atomically(a.out, a.force, files, {a.problem.profile});
  }
  if (a.json) {
    std::cout << json.dump(2) << "\n";
    return;
  }
  fmt::print("{}: {}; frontier of {} plans solved in {:.2f} s\n\n", a.problem.profile,
             schedule_text(solved.solution.problem, a.problem), solved.solution.frontier.points.size(),
             solved.solution.solve_seconds());
  fmt::print("{}\n{}", report::methods_text(c), report::stragglers_text(c));
  if (!rows.empty()) fmt::print("\n{}", report::large_scale_text(rows));
  if (!a.out.empty()) fmt::print("\nWrote {}\n", a.out);
}

struct ReportArgs {
  CompareArgs compare;
  std::string assets;
  std::string kareus;  // a `perseus kareus compare --out` directory
  bool geo = false;    // add the geo-distributed training section
  std::vector<std::string> figure_formats = {"svg"};
};

void run_report(const ReportArgs& r) {
  const CompareArgs& a = r.compare;
  // Checked before anything is solved or written.
  std::vector<report::ImageFormat> formats;
  for (const std::string& f : r.figure_formats) formats.push_back(report::parse_image_format(f));
  check_replaceable_file(a.out, true, {a.problem.profile});
  if (!r.assets.empty()) check_output_directory(r.assets, a.force, {a.problem.profile});
  const Progress progress = progress_printer(a.quiet);
  const auto large = a.large_scale ? large_scale_profiles(a) : std::vector<LargeScaleProfile>{};
  const Solved solved = solve_and_compare(a, progress);
  const EnergyProblem& problem = solved.solution.problem;
  const Comparison& c = solved.comparison;
  const std::vector<LargeScaleRow> rows = large_scale_rows(a, large, progress);

  // The T_min and T* plans, emulated on one pipeline with the configured links.
  EmulationConfig single = make_config(a.links);
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, solved.profile));
  const MethodCurve& perseus = c.method(kPerseus);
  const MethodPoint* star = perseus_choice(perseus, std::numeric_limits<double>::infinity(), problem.p_blocking,
                                           c.gpus_per_pipeline);
  const EmulationResult t_min_run = emulate(problem, execution_plan(problem, perseus.points.front(), clocks), single);
  const EmulationResult t_star_run = emulate(problem, execution_plan(problem, *star, clocks), single);

  report::ReportInput input;
  input.title = fmt::format("perseus report: {}", fs::path(a.problem.profile).filename().string());
  input.facts = {{"profile", a.problem.profile},
                 {"schedule", schedule_text(problem, a.problem)},
                 {"p_blocking", fmt::format("{} W", a.problem.p_blocking)},
                 {"unit time", fmt::format("{} s", a.problem.unit_time)},
                 {"GPUs per pipeline", fmt::format("{} ({} stages x TP {})", c.gpus_per_pipeline,
                                                   problem.dag.num_stages(), a.links.tensor_parallel)},
                 {"frequency switch latency", fmt::format("{} s", a.links.switch_latency)},
                 {"frontier", fmt::format("{} plans from {} crawl steps, solved in {:.2f} s",
                                          solved.solution.frontier.points.size(), solved.solution.crawl.steps.size(),
                                          solved.solution.solve_seconds())}};
  input.comparison = &c;
  input.t_min_run = &t_min_run;
  input.t_star_run = &t_star_run;
  input.large_scale = rows;
  if (!r.kareus.empty()) {
    // The four methods' frontiers of a Kareus comparison, drawn in their own section.
    const fs::path file = fs::path(r.kareus) / "comparison.json";
    std::ifstream in(file);
    if (!in) throw InputError(fmt::format("--kareus {}: no comparison.json (write it with perseus kareus compare --out)", r.kareus));
    try {
      const nlohmann::json k = nlohmann::json::parse(in);
      for (const nlohmann::json& m : k.at("methods")) {
        report::TradeoffSeries series{m.at("method").get<std::string>(), {}};
        for (const nlohmann::json& p : m.at("frontier")) series.points.emplace_back(p.at(0).get<double>(), p.at(1).get<double>());
        input.method_frontiers.push_back(std::move(series));
      }
      input.method_frontiers_title = fmt::format("Kareus: {} on {}, the four methods", k.at("model").get<std::string>(),
                                                 k.at("gpu").get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: not a perseus kareus comparison ({})", file.string(), e.what()));
    }
  }
  std::vector<std::pair<std::string, std::string>> geo_figures;
  if (r.geo) {
    const geo::GeoEvaluation evaluation = geo::evaluate_geo([&](const std::string& what) {
      if (progress) progress("geo: " + what);
    });
    input.sections.push_back(report::geo_section(evaluation));
    geo_figures = report::geo_figures(evaluation);
  }
  for (const EmulationResult* run : {&t_min_run, &t_star_run}) {
    for (const std::string& w : run->warnings) input.warnings.push_back(w);
  }
  const std::string html = report::html_report(input);
  check_replaceable_file(a.out, true, {a.problem.profile});  // a file is replaced; a device, a directory or the input never
  write_file_atomically(a.out, html);

  if (!r.assets.empty()) {
    nlohmann::json json = report::comparison_to_json(c, true);
    if (!rows.empty()) json["large_scale"] = report::large_scale_to_json(rows);
    report::TimelinePlotOptions t_min_options, t_star_options;
    t_min_options.title = "T_min plan";
    t_star_options.title = "T* plan";
    std::vector<std::pair<std::string, std::string>> figures = {
        {"frontier", report::frontier_svg(c)},
        {"timeline_t_min", report::timeline_svg(t_min_run, t_min_options)},
        {"timeline_t_star", report::timeline_svg(t_star_run, t_star_options)}};
    if (!c.stragglers.empty()) {
      figures.emplace_back("savings_breakdown", report::savings_breakdown_svg(c));
      figures.emplace_back("straggler_savings", report::straggler_savings_svg(c));
    }
    if (!rows.empty()) {
      figures.emplace_back("large_scale", report::large_scale_svg(rows));
      figures.emplace_back("large_scale_energy", report::large_scale_energy_svg(rows));
    }
    for (const auto& [name, svg] : geo_figures) figures.emplace_back("geo_" + name, svg);
    std::vector<std::pair<std::string, std::string>> files = {
        {"trace_t_min.json", to_text([&](std::ostream& o) { report::write_chrome_trace(o, t_min_run); })},
        {"trace_t_star.json", to_text([&](std::ostream& o) { report::write_chrome_trace(o, t_star_run); })},
        {"comparison.json", json.dump(2) + "\n"}};
    if (progress && formats.size() > 1) progress(fmt::format("rendering {} figures", figures.size()));
    for (const auto& [name, svg] : figures) {
      for (const report::ImageFormat format : formats) {
        files.emplace_back(fmt::format("{}.{}", name, report::extension(format)), report::render_image(svg, format));
      }
    }
    write_directory_atomically(r.assets, a.force, files, {a.problem.profile});
  }
  if (a.json) {
    nlohmann::json out = {{"report", a.out}, {"bytes", html.size()}, {"t_min_s", c.t_min_s}, {"t_star_s", c.t_star_s}};
    if (!r.assets.empty()) out["assets"] = r.assets;
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("Wrote {} ({} KiB){}\n", a.out, html.size() / 1024, r.assets.empty() ? "" : "; assets in " + r.assets);
}

}  // namespace

void add_emulator_commands(CLI::App& app) {
  static EmulateArgs emulate_args;
  static ProblemOptions emulate_given;
  CLI::App* em = app.add_subcommand("emulate", "Emulate one training iteration of a plan on a cluster");
  em->footer(
      "The plan: --plan FILE (freqs_pipeline .py or perseus.plan/1 .json), --frontier DIR (a perseus optimize "
      "output; the fastest plan, or the one for --deadline; --respond answers --straggler with T_opt), or "
      "--baseline allmax|envpipe|zeus-global:MHZ (default allmax).\n"
      "Example: perseus emulate --profile P.csv --microbatches 12 --p-blocking 83.64 --plan freqs_pipeline_00000.py "
      "--data-parallel 128 --tensor-parallel 8 --straggler 5:1.2 --switch-latency 0.01 --out emu/\n"
      "Several iterations: perseus emulate --frontier out/ --data-parallel 16 --iterations 50 "
      "--straggler-slowdown 1.05:1.5 --straggler-probability 0.3 --noise 0.02 --power-sample 0.05 --out run/");
  emulate_given = add_problem_flags(em, emulate_args.problem, false);
  add_link_flags(em, emulate_args.links);
  em->add_option("--data-parallel", emulate_args.data_parallel, "Pipelines D (gradients synchronise at the end)")
      ->capture_default_str();
  em->add_option("--straggler", emulate_args.stragglers,
                 "PIPELINE:SLOWDOWN[:DELAY]: a pipeline slowed by a factor >= 1, starting DELAY s late; repeatable");
  em->add_option("--plan", emulate_args.plan, "The plan to run: a freqs_pipeline file or a perseus.plan/1 JSON")
      ->check(CLI::ExistingFile);
  em->add_option("--straggler-plan", emulate_args.straggler_plan, "What the stragglers run (default: the same plan)")
      ->check(CLI::ExistingFile);
  em->add_option("--frontier", emulate_args.frontier, "A directory written by perseus optimize")->check(CLI::ExistingDirectory);
  em->add_option("--deadline", emulate_args.deadline, "With --frontier: the plan for this iteration time, s")
      ->check(kPositive);
  em->add_flag("--respond", emulate_args.respond,
               "With --frontier and --straggler: non-stragglers run the plan for T_opt = min(T*, T')");
  em->add_option("--baseline", emulate_args.baseline, "allmax, envpipe or zeus-global:MHZ");
  em->add_flag("--interpolate", emulate_args.interpolate, "Allow clocks between two measured ones (linear in frequency)");
  em->add_option("--out", emulate_args.out,
                 "Directory for emulation.json (summary), devices.csv (every device), timeline.csv, trace.json "
                 "(Perfetto), timeline.svg and pipelines/pipeline_NNNNN.json (see --trace)");
  em->add_flag("--force", emulate_args.force, "Replace an existing --out directory");
  em->add_flag("--per-gpu", emulate_args.per_gpu, "timeline.csv: one row per GPU instead of per tensor-parallel group");
  em->add_option("--timeline-pipeline", emulate_args.timeline_pipeline,
                 "The pipeline timeline.svg draws (its timeline is written with the notable ones)")
      ->capture_default_str();
  em->add_option("--trace", emulate_args.trace,
                 "Whose timelines --out writes (timeline.csv, trace.json, pipelines/): notable (the stragglers, the "
                 "fastest and a typical pipeline) or all")
      ->capture_default_str();
  em->add_flag("--json", emulate_args.json, "Print the summary as JSON");
  em->add_flag("-q,--quiet", emulate_args.quiet, "No progress messages");
  const std::string runs = "Several iterations (with --frontier: Perseus answers each iteration's straggler)";
  em->add_option("--iterations", emulate_args.iterations,
                 "Iterations to run one after the other, each with its own straggler and noise; totals and savings "
                 "against --baseline (default allmax) and against the fastest plan everywhere")
      ->check(CLI::Range(1, 100000))
      ->group(runs);
  em->add_option("--straggler-slowdown", emulate_args.straggler_slowdown,
                 "MIN[:MAX]: each iteration's straggler is slowed by a factor drawn uniformly in [MIN, MAX]")
      ->group(runs);
  em->add_option("--straggler-probability", emulate_args.straggler_probability,
                 "Probability that an iteration has a straggler")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0))
      ->group(runs);
  em->add_option("--straggler-placement", emulate_args.straggler_placement,
                 "random (a pipeline drawn each iteration), moving (from --straggler-pipeline on, the next one every "
                 "--straggler-move-every iterations) or fixed (--straggler-pipeline)")
      ->capture_default_str()
      ->group(runs);
  em->add_option("--straggler-pipeline", emulate_args.straggler_pipeline, "The fixed or first moving straggler")
      ->capture_default_str()
      ->group(runs);
  em->add_option("--straggler-move-every", emulate_args.straggler_move_every, "Iterations before a moving straggler moves")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000))
      ->group(runs);
  em->add_option("--noise", emulate_args.noise,
                 "Per-instruction noise: relative standard deviation of every instruction's time (same power), "
                 "normal, cut at 3 sigma; at most 0.3")
      ->check(CLI::Range(0.0, 0.3))
      ->group(runs);
  em->add_option("--seed", emulate_args.seed, "Seed of the stragglers and the noise")->capture_default_str()->group(runs);
  em->add_option("--power-sample", emulate_args.power_sample,
                 "Sample the cluster's power (every GPU, blocking included) every S s into --out's power.csv")
      ->check(kNonNegative)
      ->group(runs);
  em->callback([] { run_emulate(emulate_args, emulate_given); });

  static CompareArgs compare_args;
  CLI::App* cmp = app.add_subcommand("compare", "Perseus against AllMax, ZeusGlobal, ZeusPerStage and EnvPipe");
  cmp->footer(
      "Prints the method table (time, energy, savings versus AllMax at iso-time), the straggler table and, with "
      "--large-scale, the large-scale table.\n"
      "Example: perseus compare --profile data/profiles/bloom-176b+a100-sxm.csv --microbatches 12 --p-blocking 83.64 "
      "--unit-time 0.001 --out cmp/");
  add_problem_flags(cmp, compare_args.problem, true);
  add_compare_flags(cmp, compare_args);
  cmp->add_option("--out", compare_args.out,
                  "Directory for comparison.json, methods.csv, stragglers.csv, points.csv (and large_scale.csv)");
  cmp->add_flag("--force", compare_args.force, "Replace an existing --out directory");
  cmp->add_flag("--json", compare_args.json, "Print the tables as JSON");
  cmp->callback([] { run_compare(compare_args); });

  static ReportArgs report_args;
  CLI::App* rep = app.add_subcommand("report", "Write one self-contained HTML page: summary, frontier, timelines, tables");
  rep->footer(
      "Example: perseus report --profile data/profiles/bloom-176b+a100-sxm.csv --microbatches 12 --p-blocking 83.64 "
      "--unit-time 0.001 --out report.html");
  add_problem_flags(rep, report_args.compare.problem, true);
  add_compare_flags(rep, report_args.compare);
  rep->add_option("--out", report_args.compare.out, "The HTML file to write")->required();
  rep->add_option("--assets", report_args.assets,
                  "Also write the pictures and traces as files in this directory (frontier, timeline_t_min, "
                  "timeline_t_star, savings_breakdown, straggler_savings, large_scale and large_scale_energy as "
                  "--figure-formats; "
                  "trace_*.json, comparison.json)");
  rep->add_option("--figure-formats", report_args.figure_formats,
                  "Formats of the figures in --assets: svg, png (2x), pdf; comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  rep->add_option("--kareus", report_args.kareus,
                  "Also draw the four methods' frontiers of a `perseus kareus compare --out` directory")
      ->check(CLI::ExistingDirectory);
  rep->add_flag("--geo", report_args.geo,
               "Add a section on geo-distributed training: Atlas's Figs. 8-11, BubbleTea and fill or slow, rerun (about 4 s)");
  rep->add_flag("--force", report_args.compare.force, "Replace an existing --assets directory");
  rep->add_flag("--json", report_args.compare.json, "Print what was written as JSON");
  rep->callback([] { run_report(report_args); });
}

}  // namespace perseus::cli
