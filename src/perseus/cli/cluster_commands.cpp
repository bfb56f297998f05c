// `perseus cluster throughputs`, `allocate`, `simulate`, `run` and `serve`: a throughput matrix
// planned for the catalogue, Gavel's heterogeneity-aware policies (with the energy stage), its
// simulator, and the live scheduler on a backend, alone or as a server (docs/cluster.md). The
// work is in the cluster module; here flags are parsed and results printed or written.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/cluster/cluster_scheduler.hpp"
#include "perseus/cluster/cluster_service.hpp"
#include "perseus/cluster/emulated_backend.hpp"
#include "perseus/cluster/experiment.hpp"
#include "perseus/cluster/experiment_output.hpp"
#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/planned_matrix.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/slurm_backend.hpp"
#include "perseus/cluster/throughputs.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/report/cluster_figures.hpp"
#include "perseus/server/serve_process.hpp"

namespace perseus::cli {
namespace {

using namespace perseus::cluster;

struct AllocateArgs {
  std::string throughputs;  // empty: Gavel's, bundled
  std::string gpus;         // empty: 36 of each type
  std::string jobs;
  int random = 0;
  std::uint64_t seed = 1;
  std::string policy = "max-min-fairness";
  bool agnostic = false;
  std::string prices;
  double energy_slack = -1.0;  // < 0: no energy stage
  bool space_sharing = false;
  std::string entities;
  std::string reference_gpu;
  bool json = false;
  bool csv = false;
};

// "" or "gavel": Gavel's, bundled; "planned": the bundled planned matrix; else a file.
ThroughputMatrix load_matrix(const std::string& path) {
  if (path.empty() || path == "gavel") return read_gavel_throughputs(bundled_gavel_throughputs());
  if (path == "planned") return read_throughput_csv(bundled_planned_throughputs());
  return path.size() > 4 && path.substr(path.size() - 4) == ".csv" ? read_throughput_csv(path) : read_gavel_throughputs(path);
}

void run_allocate(const AllocateArgs& a) {
  const ThroughputMatrix matrix = load_matrix(a.throughputs);
  const std::vector<int> workers =
      a.gpus.empty() ? std::vector<int>(static_cast<std::size_t>(matrix.num_gpu_types()), 36) : parse_gpu_counts(a.gpus, matrix);
  if (a.jobs.empty() == (a.random == 0)) throw InputError("give the jobs: --jobs FILE or --random N");
  PolicySpec spec;
  spec.policy = parse_policy(a.policy);
  spec.heterogeneity_aware = !a.agnostic;
  spec.prices_per_hour = parse_prices(a.prices, matrix, needs_prices(spec.policy));
  if (a.energy_slack >= 0.0) spec.energy_slack = a.energy_slack;
  spec.space_sharing = a.space_sharing;
  const bool hierarchical = spec.policy == PolicyKind::kHierarchical;
  if (!a.entities.empty() && !hierarchical) throw InputError("--entities is for --policy hierarchical");
  if (!a.entities.empty()) spec.entities = parse_entities(a.entities);
  std::vector<Job> jobs = a.jobs.empty() ? random_jobs(matrix, a.random, a.seed, a.reference_gpu)
                                         : read_jobs_csv(a.jobs, matrix, hierarchical ? &spec.entities : nullptr);
  // Drawn jobs are dealt to the entities round-robin.
  if (a.jobs.empty())
    for (std::size_t m = 0; m < jobs.size(); ++m) jobs[m].entity = dealt_entity(m, spec);
  const std::vector<Entity> entities = entities_of(spec);
  const auto entity_name = [&](const Job& job) { return entities[static_cast<std::size_t>(job.entity)].name; };
  const bool energy = matrix.has_energy();
  const auto start = std::chrono::steady_clock::now();
  const Allocation r = allocate(jobs, matrix, workers, spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Each job's time spent sharing GPUs, over its pairs.
  std::vector<double> shared(jobs.size(), 0.0);
  for (const SharedShare& p : r.pairs)
    for (double x : p.share) shared[static_cast<std::size_t>(p.first)] += x, shared[static_cast<std::size_t>(p.second)] += x;
  // The hierarchical policy: each entity's jobs and GPUs (its jobs' time x scale factor; half a
  // pair's GPUs per job).
  nlohmann::json entities_json = nullptr;
  if (hierarchical) {
    std::vector<double> entity_gpus(entities.size(), 0.0);
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      double time = shared[m] / 2.0;
      for (double x : r.share[m]) time += x;
      entity_gpus[static_cast<std::size_t>(jobs[m].entity)] += time * matrix.job_types[jobs[m].type].scale_factor;
    }
    entities_json = nlohmann::json::array();
    for (std::size_t e = 0; e < entities.size(); ++e)
      entities_json.push_back({{"name", entities[e].name},
                               {"weight", entities[e].weight},
                               {"policy", to_string(entities[e].policy)},
                               {"jobs", std::count_if(jobs.begin(), jobs.end(), [&](const Job& j) { return j.entity == static_cast<int>(e); })},
                               {"gpus", entity_gpus[e]}});
  }
  if (a.json) {
    nlohmann::json pairs = nlohmann::json::array();
    for (const SharedShare& p : r.pairs) {
      nlohmann::json speeds = nlohmann::json::array();
      for (int j = 0; j < matrix.num_gpu_types(); ++j) {
        const auto s = matrix.shared_speeds(jobs[p.first].type, jobs[p.second].type, j);
        speeds.push_back(s ? nlohmann::json{s->first, s->second} : nlohmann::json(nullptr));
      }
      pairs.push_back({{"jobs", {p.first, p.second}}, {"share", p.share}, {"speed_steps_per_s", speeds}});
    }
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t m = 0; m < jobs.size(); ++m)
      rows.push_back({{"job", m},
                      {"type", matrix.job_types[jobs[m].type].name()},
                      {"entity", hierarchical ? nlohmann::json(entity_name(jobs[m])) : nlohmann::json(nullptr)},
                      {"share", r.share[m]},
                      {"speed_steps_per_s", r.speed[m]},
                      {"power_w", energy ? nlohmann::json(r.power_w[m]) : nlohmann::json(nullptr)},
                      {"shared_share", shared[m]},
                      {"steps_per_s", r.throughput[m]}});
    std::cout << nlohmann::json{{"policy", to_string(spec.policy)},
                                {"heterogeneity_aware", spec.heterogeneity_aware},
                                {"energy_slack", spec.energy_slack ? nlohmann::json(*spec.energy_slack) : nlohmann::json(nullptr)},
                                {"space_sharing", spec.space_sharing},
                                {"entities", entities_json},
                                {"gpu_types", matrix.gpu_types},
                                {"workers", workers},
                                {"objective", r.objective},
                                {"power_w", energy ? nlohmann::json(r.power_w_total) : nlohmann::json(nullptr)},
                                {"lp_solves", r.lp_solves},
                                {"solve_s", seconds},
                                {"jobs", rows},
                                {"pairs", pairs}}
                     .dump(1)
              << "\n";
    return;
  }
  if (a.csv) {
    fmt::print("job,type,entity");
    for (const std::string& g : matrix.gpu_types) fmt::print(",{}", g);
    fmt::print(",shared,steps_per_s,power_w\n");
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      fmt::print("{},\"{}\",{}", m, matrix.job_types[jobs[m].type].name(), hierarchical ? entity_name(jobs[m]) : std::string());
      for (double x : r.share[m]) fmt::print(",{:.6f}", x);
      double power = 0.0;
      for (std::size_t j = 0; j < r.share[m].size(); ++j) power += r.share[m][j] * r.power_w[m][j];
      fmt::print(",{:.6f},{:.6g},{}\n", shared[m], r.throughput[m], energy ? fmt::format("{:.6g}", power) : std::string());
    }
    return;
  }
  std::string cluster;
  for (int j = 0; j < matrix.num_gpu_types(); ++j) cluster += fmt::format("{}{} {}", j ? ", " : "", workers[j], matrix.gpu_types[j]);
  fmt::print("{} ({}) for {} jobs on {}: objective {:.6g}, {} LP solve(s) in {:.3f} s\n", to_string(spec.policy),
             spec.heterogeneity_aware ? "heterogeneity-aware" : "heterogeneity-agnostic", jobs.size(), cluster, r.objective,
             r.lp_solves, seconds);
  if (spec.space_sharing)
    fmt::print("space sharing: {} pairs of jobs share GPUs (time together in the 'shared' column; --json lists the pairs)\n",
               r.pairs.size());
  if (energy)
    fmt::print("cluster power {:.1f} kW{}\n", r.power_w_total / 1000.0,
               spec.energy_slack ? fmt::format(" (energy stage: every job keeps {:g}% of its throughput)", 100.0 * (1.0 - *spec.energy_slack))
                                 : std::string());
  if (hierarchical) {
    // Aware, weights divide normalised throughput (each job's against an equal share), not GPUs.
    fmt::print("  {:<16} {:>7} {:>9} {:>5} {:>8}\n", "entity", "weight", "policy", "jobs", "GPUs");
    for (const auto& e : entities_json)
      fmt::print("  {:<16} {:>7.3g} {:>9} {:>5} {:>8.2f}\n", e["name"].get<std::string>(), e["weight"].get<double>(),
                 e["policy"].get<std::string>(), e["jobs"].get<long>(), e["gpus"].get<double>());
  }
  fmt::print("  {:>4}  {:<36}", "job", "type");
  if (hierarchical) fmt::print(" {:<12}", "entity");
  for (const std::string& g : matrix.gpu_types) fmt::print(" {:>7}", g);
  if (spec.space_sharing) fmt::print(" {:>7}", "shared");
  fmt::print(" {:>10}\n", "steps/s");
  const std::size_t shown = std::min<std::size_t>(jobs.size(), 40);
  for (std::size_t m = 0; m < shown; ++m) {
    fmt::print("  {:>4}  {:<36}", m, matrix.job_types[jobs[m].type].name());
    if (hierarchical) fmt::print(" {:<12}", entity_name(jobs[m]));
    for (double x : r.share[m]) fmt::print(" {:>7.3f}", x);
    if (spec.space_sharing) fmt::print(" {:>7.3f}", shared[m]);
    fmt::print(" {:>10.3f}\n", r.throughput[m]);
  }
  if (shown < jobs.size()) fmt::print("  ... {} more (--csv or --json for all)\n", jobs.size() - shown);
}

struct SimulateArgs {
  std::string throughputs, gpus;
  int gpus_per_server = 4;
  std::vector<std::string> policies{"max-min-fairness"};
  bool agnostic = false, compare = false;
  std::string prices;
  std::string energy_slack = "off";
  std::string space_sharing = "off";
  std::string entities;
  std::string reference_gpu;
  std::string trace = "continuous-single";
  std::string lambda = "4";
  int jobs = -1;
  std::string window;
  int seeds = 1;
  std::uint64_t seed = 1;
  double round_s = 360.0, restart_overhead_s = 0.0, max_days = 365.0;
  std::string out;
  bool force = false, json = false, csv = false, quiet = false;
};

std::vector<double> parse_rates(const std::string& text) {
  std::vector<double> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    try {
      std::size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || !(v > 0.0)) throw std::invalid_argument("rate");
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--lambda '{}': '{}' is not a rate > 0 (jobs/hour)", text, item));
    }
  }
  if (out.empty()) throw InputError("--lambda: give at least one rate");
  return out;
}

// "off,0,0.05" -> {none, 0, 0.05}.
std::vector<std::optional<double>> parse_slacks(const std::string& text) {
  std::vector<std::optional<double>> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item == "off") {
      out.emplace_back();
      continue;
    }
    try {
      std::size_t used = 0;
      const double v = std::stod(item, &used);
      if (used != item.size() || !(v >= 0.0 && v < 1.0)) throw std::invalid_argument("slack");
      out.emplace_back(v);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--energy-slack '{}': '{}' is neither 'off' nor a share in [0, 1)", text, item));
    }
  }
  if (out.empty()) throw InputError("--energy-slack: give 'off' or at least one share");
  return out;
}

// "off", "on" or "off,on" -> {false}, {true}, {false, true}.
std::vector<bool> parse_sharing(const std::string& text) {
  std::vector<bool> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item != "off" && item != "on") throw InputError(fmt::format("--space-sharing '{}': '{}' is neither 'off' nor 'on'", text, item));
    out.push_back(item == "on");
  }
  if (out.empty()) throw InputError("--space-sharing: give off, on or off,on");
  return out;
}

void run_simulate(const SimulateArgs& a) {
  const ThroughputMatrix matrix = load_matrix(a.throughputs);
  ExperimentSpec spec;
  spec.simulation.workers =
      a.gpus.empty() ? std::vector<int>(static_cast<std::size_t>(matrix.num_gpu_types()), 36) : parse_gpu_counts(a.gpus, matrix);
  spec.simulation.gpus_per_server = a.gpus_per_server;
  spec.simulation.round_s = a.round_s;
  spec.simulation.restart_overhead_s = a.restart_overhead_s;
  spec.simulation.max_time_s = a.max_days * 86400.0;
  bool any_costed = false;
  for (const std::string& p : a.policies) any_costed = any_costed || needs_prices(parse_policy(p));
  const std::vector<double> prices = parse_prices(a.prices, matrix, any_costed);
  const std::vector<std::optional<double>> slacks = parse_slacks(a.energy_slack);
  const std::vector<bool> sharing = parse_sharing(a.space_sharing);
  for (const std::string& p : a.policies) {
    const PolicyKind kind = parse_policy(p);
    for (const bool shares : sharing)
      for (const std::optional<double>& slack : slacks) {
        // Space sharing is aware only: --compare's agnostic baseline runs without it, once.
        if (a.compare) {
          spec.variants.push_back({kind, true, prices, slack, shares});
          if (!shares) spec.variants.push_back({kind, false, prices, slack, false});
        } else {
          spec.variants.push_back({kind, !a.agnostic, prices, slack, shares});
        }
      }
  }
  if (!a.entities.empty()) spec.entities = parse_entities(a.entities);
  spec.reference_gpu = a.reference_gpu;
  spec.trace = parse_trace(a.trace);
  if (spec.trace == TraceKind::kFile) spec.trace_file = a.trace;
  const bool continuous = spec.trace == TraceKind::kContinuousSingle || spec.trace == TraceKind::kContinuousMultiple;
  if (continuous) spec.jobs_per_hour = parse_rates(a.lambda);
  spec.seeds = a.seeds;
  spec.first_seed = a.seed;
  // The jobs measured: --window, else the last fifth of --jobs (Gavel: 4000 to 5000 of 5000).
  const int jobs = a.jobs > 0 ? a.jobs
                              : continuous                           ? 5000
                              : spec.trace == TraceKind::kStatic     ? 100
                              : spec.trace == TraceKind::kCost       ? 500
                                                                     : -1;
  if (!a.window.empty()) {
    const auto colon = a.window.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("window");
      spec.window_begin = std::stoi(a.window.substr(0, colon));
      spec.window_end = std::stoi(a.window.substr(colon + 1));
    } catch (const std::exception&) {
      throw InputError(fmt::format("--window '{}': expected FIRST:END (arrival indices, END excluded)", a.window));
    }
  } else {
    spec.window_begin = continuous ? jobs - jobs / 5 : 0;
    spec.window_end = jobs;
  }
  const bool terminal = isatty(2) && !a.quiet;
  if (!a.quiet) spec.progress = [](const std::string& what) { fmt::print(stderr, "perseus: {}\n", what); };
  if (terminal)
    spec.simulation.progress = [](const SimulationProgress& p) {
      fmt::print(stderr, "\r  {:.0f} h simulated, {} jobs arrived, {} of {} measured jobs done   ", p.time_s / 3600.0, p.arrived,
                 p.window_finished, p.window_size);
    };
  // Fail before a long run, not after it (write_directory_atomically checks it all again).
  if (!a.out.empty()) check_output_directory(a.out, a.force);
  const auto runs = run_experiment(spec, matrix);
  if (terminal) fmt::print(stderr, "\n");

  if (!a.out.empty()) {
    std::vector<std::pair<std::string, std::string>> files{
        {"summary.json", experiment_json(runs, matrix, spec)},
        {"runs.csv", runs_csv(runs, matrix)},
        {"jobs.csv", jobs_csv(runs, matrix)},
        {"rounds.csv", rounds_csv(runs, matrix)},
        {"report.html", report::cluster_report_html(runs, matrix, spec)}};
    for (auto& [stem, svg] : report::cluster_figures(runs, matrix)) files.emplace_back(stem + ".svg", std::move(svg));
    std::vector<std::filesystem::path> inputs;
    if (spec.trace == TraceKind::kFile) inputs.emplace_back(spec.trace_file);
    if (!a.throughputs.empty() && a.throughputs != "gavel" && a.throughputs != "planned") inputs.emplace_back(a.throughputs);
    write_directory_atomically(a.out, a.force, files, inputs);
  }
  if (a.json) {
    std::cout << experiment_json(runs, matrix, spec);
    return;
  }
  if (a.csv) {
    std::cout << runs_csv(runs, matrix);
    return;
  }
  fmt::print("{:<46} {:>9} {:>5} {:>10} {:>7} {:>10} {:>10}", "policy", "jobs/hour", "seed", "avg JCT h", "avg rho", "makespan h",
             "unfinished");
  for (const std::string& g : matrix.gpu_types) fmt::print(" {:>6}", g);
  fmt::print(" {:>7} {:>10} {:>10} {:>8} {:>8}\n", "gap", "cost $", "energy kWh", "SLO miss", "wall s");
  for (const ExperimentRun& r : runs) {
    const SimulationResult& s = r.result;
    fmt::print("{:<46} {:>9} {:>5} {:>10.2f} {:>7.2f} {:>10.2f} {:>10}", variant_name(r.variant),
               r.jobs_per_hour > 0.0 ? fmt::format("{:g}", r.jobs_per_hour) : "-", r.seed, s.average_jct_s / 3600.0,
               s.average_finish_time_fairness, s.makespan_s / 3600.0, s.window_unfinished);
    for (double u : s.utilisation) fmt::print(" {:>5.0f}%", 100.0 * u);
    fmt::print(" {:>7.3f} {:>10} {:>10} {:>8} {:>8.2f}\n", s.allocation_gap,
               r.variant.prices_per_hour.empty() ? "-" : fmt::format("{:.0f}", s.cost),
               matrix.has_energy() ? fmt::format("{:.0f}", s.energy_j / 3.6e6) : "-",
               s.slo_jobs ? fmt::format("{}/{}", s.slo_violations, s.slo_jobs) : "-", r.wall_s);
  }
  if (!a.out.empty()) fmt::print("wrote {}/ (report.html, summary.json, runs.csv, jobs.csv, rounds.csv, figures)\n", a.out);
}

struct ThroughputsArgs {
  PlannedMatrixSpec spec;
  std::string out;
  bool force = false, json = false, csv = false, quiet = false;
};

void run_throughputs(const ThroughputsArgs& a) {
  if (!a.out.empty()) check_replaceable_file(a.out, a.force);
  PlannedMatrixSpec spec = a.spec;
  if (isatty(2) && !a.quiet)
    spec.progress = [](int done, int total, const std::string& cell) {
      if (done < total) fmt::print(stderr, "\r  planning {} of {}: {:<40}", done + 1, total, cell);
      else fmt::print(stderr, "\r{:<80}\r", "");
    };
  const auto start = std::chrono::steady_clock::now();
  const PlannedMatrix planned = plan_matrix(spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string csv = throughput_csv(planned.matrix);
  if (!a.out.empty()) {
    prepare_output_parent(a.out);
    write_file_atomically(a.out, csv);
  }
  if (a.csv) {
    std::cout << csv;
    return;
  }
  if (a.json) {
    nlohmann::json cells = nlohmann::json::array();
    for (const PlannedCell& c : planned.cells) {
      nlohmann::json row{{"model", c.model}, {"scale_factor", c.scale_factor}, {"gpu", c.gpu}, {"fits", c.fits}, {"plan_s", c.plan_s}};
      if (!c.fits) {
        row["why_not"] = c.why_not;
      } else {
        row.update({{"configuration", c.configuration},
                    {"t_min_s", c.t_min_s},
                    {"t_min_energy_j", c.t_min_energy_j},
                    {"t_star_s", c.t_star_s},
                    {"t_star_energy_j", c.t_star_energy_j},
                    {"least_energy_s", c.least_energy_s},
                    {"least_energy_j", c.least_energy_j},
                    {"all_max_energy_j", c.all_max_energy_j}});
      }
      cells.push_back(std::move(row));
    }
    std::cout << nlohmann::json{{"gpu_types", planned.matrix.gpu_types},
                                {"job_types", planned.matrix.num_job_types()},
                                {"left_out", planned.left_out},
                                {"cells", cells},
                                {"seconds", seconds},
                                {"out", a.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.out)}}
                     .dump(1)
              << "\n";
    return;
  }
  fmt::print("{:<22} {:<9} {:<34} {:>10} {:>12} {:>12} {:>12} {:>8}\n", "job type", "gpu", "configuration", "T_min s",
             "all-max kJ", "T_min kJ", "least kJ", "slower");
  for (const PlannedCell& c : planned.cells) {
    const std::string job = fmt::format("{} x{}", c.model, c.scale_factor);
    if (!c.fits) {
      fmt::print("{:<22} {:<9} does not fit\n", job, c.gpu);
      continue;
    }
    fmt::print("{:<22} {:<9} {:<34} {:>10.3f} {:>12.2f} {:>12.2f} {:>12.2f} {:>7.0f}%\n", job, c.gpu, c.configuration, c.t_min_s,
               c.all_max_energy_j / 1e3, c.t_min_energy_j / 1e3, c.least_energy_j / 1e3, 100.0 * (c.least_energy_s / c.t_min_s - 1.0));
  }
  fmt::print("{} job types on {} GPU types planned in {:.1f} s; energy per step (one iteration) on all the job's GPUs.\n",
             planned.matrix.num_job_types(), planned.matrix.num_gpu_types(), seconds);
  if (!planned.left_out.empty()) fmt::print("left out (fit no GPU type): {}\n", fmt::join(planned.left_out, ", "));
  if (!a.out.empty()) fmt::print("wrote {} (use it with --throughputs)\n", a.out);
}

// What `cluster run` and `cluster serve` share: the matrix, the policy, the backend, the round.
struct LiveArgs {
  std::string backend = "emulated";
  std::string throughputs;
  std::string policy = "max-min-fairness";
  bool agnostic = false;
  std::string prices;
  std::string entities;
  std::string gpus;           // emulated
  int gpus_per_server = 4;    // emulated
  std::string slurm_conf, partition, job_dir = "perseus-jobs";  // slurm
  double round_s = 360.0;
  bool space_sharing = false;  // emulated
  double energy_slack = -1.0;  // emulated; < 0: off
};

struct RunArgs : LiveArgs {
  std::string jobs;
  int max_rounds = 100000;
  bool json = false, csv = false, quiet = false;
};

struct ServeArgs : LiveArgs {
  std::string host = "127.0.0.1";
  int port = 7788;
  std::string db = "perseus-cluster.db";
  std::string token;
  double speedup = 1.0;  // emulated
  std::string log_level = "info";
};

// The live scheduler's matrix and policy from the shared options.
struct Live {
  ThroughputMatrix matrix;
  PolicySpec spec;
};

Live make_live(const LiveArgs& a) {
  Live live;
  live.matrix = load_matrix(a.throughputs);
  live.spec = PolicySpec(parse_policy(a.policy), !a.agnostic);
  live.spec.prices_per_hour = parse_prices(a.prices, live.matrix, needs_prices(live.spec.policy));
  if (!a.entities.empty() && live.spec.policy != PolicyKind::kHierarchical) throw InputError("--entities is for --policy hierarchical");
  if (!a.entities.empty()) live.spec.entities = parse_entities(a.entities);
  live.spec.space_sharing = a.space_sharing;
  if (a.energy_slack >= 0.0) live.spec.energy_slack = a.energy_slack;
  if (a.backend != "emulated" && a.backend != "slurm") throw InputError(fmt::format("--backend '{}': emulated or slurm", a.backend));
  // Before connecting to Slurm (the scheduler would say the same once connected).
  if (a.backend == "slurm") check_backend_supports(live.spec, SlurmBackend::kSharesGpus, SlurmBackend::kPacesJobs);
  return live;
}

// The backend (Slurm's connects to slurmctld).
std::unique_ptr<ClusterBackend> make_backend(const LiveArgs& a, const ThroughputMatrix& matrix) {
  if (a.backend == "slurm") return std::make_unique<SlurmBackend>(matrix.gpu_types, SlurmOptions{a.slurm_conf, a.partition, a.job_dir});
  EmulatedCluster c;
  c.truth = matrix;
  c.workers = a.gpus.empty() ? std::vector<int>(matrix.gpu_types.size(), 36) : parse_gpu_counts(a.gpus, matrix);
  c.gpus_per_server = a.gpus_per_server;
  return std::make_unique<EmulatedBackend>(std::move(c));
}

// The options of LiveArgs, for both commands.
void add_live_options(CLI::App* cmd, LiveArgs& a) {
  cmd->add_option("--backend", a.backend, "emulated or slurm")->capture_default_str();
  cmd->add_option("--throughputs", a.throughputs, "Throughput matrix: 'gavel' (the default), 'planned', Gavel's JSON or a CSV");
  cmd->add_option("--policy", a.policy,
                  "max-min-fairness (las), fifo, makespan, finish-time-fairness (ftf), shortest-job-first (sjf), "
                  "max-throughput, min-cost, min-cost-slo, hierarchical")
      ->capture_default_str();
  cmd->add_flag("--agnostic", a.agnostic, "Heterogeneity-agnostic (the baseline)");
  cmd->add_option("--prices", a.prices, "$ per GPU-hour for the cost policies, e.g. k80:0.9,p100:1.46,v100:3.06");
  cmd->add_option("--entities", a.entities, "Hierarchical: NAME[:WEIGHT[:fairness|fifo]],...");
  cmd->add_option("--gpus", a.gpus, "Emulated: GPUs per type, e.g. k80:36,p100:36,v100:36 (the default)");
  cmd->add_option("--gpus-per-server", a.gpus_per_server, "Emulated: GPUs per server")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--slurm-conf", a.slurm_conf, "Slurm: slurm.conf (default: $SLURM_CONF or Slurm's own)");
  cmd->add_option("--partition", a.partition, "Slurm: partition (default: the cluster's default)");
  cmd->add_option("--job-dir", a.job_dir, "Slurm: each job's directory is DIR/job-ID (on a file system the nodes share)")
      ->capture_default_str();
  cmd->add_option("--round", a.round_s, "Round length (s)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--space-sharing", a.space_sharing,
                "Emulated: pairs of jobs share GPUs where that beats taking turns (aware policies, Gavel's matrix)");
  cmd->add_option("--energy-slack", a.energy_slack,
                  "Emulated: the energy stage, each job keeping 1 - SLACK of its throughput at slower clocks (a matrix with energy)")
      ->check(CLI::Range(0.0, 0.999999));
}

void run_live(const RunArgs& a) {
  Live live = make_live(a);
  const ThroughputMatrix& matrix = live.matrix;
  const PolicySpec& spec = live.spec;
  std::vector<std::string> commands;
  const std::vector<Job> jobs =
      read_jobs_csv(a.jobs, matrix, spec.policy == PolicyKind::kHierarchical ? &live.spec.entities : nullptr, &commands);
  if (jobs.empty()) throw InputError(fmt::format("{}: no jobs", a.jobs));
  if (a.backend == "slurm")
    for (std::size_t m = 0; m < jobs.size(); ++m)
      if (commands[m].empty())
        throw InputError(fmt::format("{}: job {} has no command (the slurm backend runs each job's `command` column)", a.jobs, m));
  const std::unique_ptr<ClusterBackend> backend = make_backend(a, matrix);
  ClusterScheduler scheduler(matrix, *backend, {spec, a.round_s});
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    try {
      scheduler.submit({jobs[m].type, jobs[m].steps, jobs[m].weight, jobs[m].slo_s, jobs[m].entity, commands[m]});
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: job {}: {}", a.jobs, m, e.what()));
    }
  }
  while (!scheduler.idle() && scheduler.rounds_run() < a.max_rounds) {
    const RoundLog& r = scheduler.run_round();
    if (a.quiet) continue;
    int running = 0, finished = 0, failed = 0;
    for (const ScheduledJob& j : scheduler.jobs()) {
      running += j.status == JobStatus::kRunning;
      finished += j.status == JobStatus::kFinished;
      failed += j.status == JobStatus::kFailed;
    }
    std::string gpus;
    for (std::size_t g = 0; g < matrix.gpu_types.size(); ++g)
      gpus += fmt::format("{}{} {}", g ? ", " : "", r.topology.workers[g], matrix.gpu_types[g]);
    fmt::print(stderr, "round {} ({:.0f} s): {} leases on {}{}; {} running, {} finished, {} failed of {}\n", r.index, r.start_s,
               r.leases.size(), gpus, r.reallocated ? " (reallocated)" : "", running, finished, failed, scheduler.jobs().size());
  }
  if (!scheduler.idle()) backend->preempt_all();

  const auto jct = [](const ScheduledJob& j) { return j.finished_s >= 0.0 ? j.finished_s - j.submitted_s : -1.0; };
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ScheduledJob& j : scheduler.jobs())
      rows.push_back({{"job", j.id},
                      {"type", matrix.job_types[j.request.type].name()},
                      {"status", to_string(j.status)},
                      {"steps", j.request.steps},
                      {"steps_done", j.steps_done},
                      {"jct_s", j.finished_s >= 0.0 ? nlohmann::json(jct(j)) : nlohmann::json(nullptr)},
                      {"rounds", j.rounds},
                      {"preemptions", j.preemptions},
                      {"migrations", j.migrations},
                      {"energy_j", j.energy_j},
                      {"ftf_rho", j.status == JobStatus::kFinished ? nlohmann::json(j.finish_time_fairness()) : nlohmann::json(nullptr)},
                      {"detail", j.detail}});
    nlohmann::json measured = nlohmann::json::array();
    for (int m = 0; m < matrix.num_job_types(); ++m)
      for (int g = 0; g < matrix.num_gpu_types(); ++g)
        if (scheduler.measurements()[m][g] > 0)
          measured.push_back({{"type", matrix.job_types[m].name()},
                              {"gpu", matrix.gpu_types[g]},
                              {"given_steps_per_s", matrix.at(m, g)},
                              {"measured_steps_per_s", scheduler.matrix().at(m, g)},
                              {"measurements", scheduler.measurements()[m][g]}});
    std::cout << nlohmann::json{{"backend", a.backend},
                                {"policy", to_string(spec.policy)},
                                {"heterogeneity_aware", spec.heterogeneity_aware},
                                {"round_s", a.round_s},
                                {"rounds", scheduler.rounds_run()},
                                {"time_s", scheduler.now_s()},
                                {"gpu_types", matrix.gpu_types},
                                {"workers", scheduler.topology().workers},
                                {"allocation_gap", scheduler.allocation_gap()},
                                {"jobs", rows},
                                {"measured", measured}}
                     .dump(1)
              << "\n";
    return;
  }
  if (a.csv) {
    std::cout << "job,type,status,steps,steps_done,jct_s,rounds,preemptions\n";
    for (const ScheduledJob& j : scheduler.jobs())
      std::cout << fmt::format("{},\"{}\",{},{},{},{},{},{}\n", j.id, matrix.job_types[j.request.type].name(), to_string(j.status),
                               j.request.steps, j.steps_done, j.finished_s >= 0.0 ? fmt::format("{}", jct(j)) : "", j.rounds,
                               j.preemptions);
    return;
  }
  fmt::print("{} jobs on the {} backend, {} ({}), {} rounds of {:.0f} s\n", scheduler.jobs().size(), a.backend,
             to_string(spec.policy), spec.heterogeneity_aware ? "heterogeneity-aware" : "heterogeneity-agnostic",
             scheduler.rounds_run(), a.round_s);
  fmt::print("{:>4}  {:<36} {:>9} {:>12} {:>10} {:>6} {:>11}\n", "job", "type", "status", "steps done", "JCT (h)", "rounds",
             "preemptions");
  for (const ScheduledJob& j : scheduler.jobs())
    fmt::print("{:>4}  {:<36} {:>9} {:>12.1f} {:>10} {:>6} {:>11}\n", j.id, matrix.job_types[j.request.type].name(),
               to_string(j.status), j.steps_done, j.finished_s >= 0.0 ? fmt::format("{:.2f}", jct(j) / 3600.0) : "-", j.rounds,
               j.preemptions);
  for (const ScheduledJob& j : scheduler.jobs())
    if (j.status == JobStatus::kFailed) fmt::print("job {} failed: {}\n", j.id, j.detail);
  if (!scheduler.idle()) throw SolveError(fmt::format("jobs still unfinished after --max-rounds {}", a.max_rounds));
}

void run_serve(const ServeArgs& a) {
  server::StopSignals stop_signals;  // before any thread starts
  const auto logger = server::make_stderr_logger("perseus-cluster", server::parse_log_level(a.log_level, "--log-level"));
  Live live = make_live(a);
  const std::unique_ptr<ClusterBackend> backend = make_backend(a, live.matrix);
  ClusterServiceOptions options;
  options.db_path = a.db;
  options.token = a.token;
  options.min_round_wall_s = a.backend == "emulated" ? a.round_s / a.speedup : 0.0;  // Slurm's rounds take their time
  options.require_command = a.backend == "slurm";
  options.logger = logger;
  ClusterService service(live.matrix, *backend, {live.spec, a.round_s}, options);
  server::HttpOptions http_options;
  http_options.host = a.host;
  http_options.port = a.port;
  server::HttpServer http(service, http_options);
  http.bind();
  logger->info("event=listening host={} port={} db={} backend={} policy={} round_s={} jobs={} auth={}", server::logfmt_value(a.host),
               http.port(), server::logfmt_value(a.db), a.backend, to_string(live.spec.policy), a.round_s, service.job_count(),
               a.token.empty() ? "none" : "bearer");
  service.start();

  stop_signals.serve(http, *logger);
  service.stop(/*preempt=*/true);
  logger->info("event=stopped rounds={}", service.rounds_run());
}

}  // namespace

void add_cluster_commands(CLI::App& app) {
  CLI::App* cluster = app.add_subcommand("cluster", kClusterDescription);
  cluster->require_subcommand(1);
  static ThroughputsArgs thr;
  CLI::App* throughputs_cmd = cluster->add_subcommand(
      "throughputs", "A throughput matrix with energy for catalogue models and GPUs, from perseus's planner and frontiers");
  throughputs_cmd->footer(
      "Each model at each scale factor on each GPU type is planned as `perseus plan` plans it (the best configuration of "
      "that many GPUs at the model's published batch, its Perseus frontier); a step is one iteration. The CSV has a row "
      "per operating point, from the fastest plan to the least energy per step, for `cluster allocate/simulate "
      "--throughputs` and their --energy-slack.\n"
      "Example: perseus cluster throughputs -o planned.csv\n"
      "         perseus cluster simulate --throughputs planned.csv --energy-slack off,0.1 --lambda 2");
  throughputs_cmd->add_option("--models", thr.spec.models, "Catalogue models, comma-separated (perseus models)")
      ->delimiter(',')->capture_default_str();
  throughputs_cmd->add_option("--gpu-types", thr.spec.gpus, "Catalogue GPUs, comma-separated (perseus gpus)")
      ->delimiter(',')->capture_default_str();
  throughputs_cmd->add_option("--scales", thr.spec.scale_factors, "Scale factors (GPUs per job), comma-separated")
      ->delimiter(',')->capture_default_str()->check(CLI::PositiveNumber);
  throughputs_cmd->add_option("--global-batch", thr.spec.global_batch, "Sequences per iteration (default: each model's published batch)")
      ->check(CLI::PositiveNumber);
  throughputs_cmd->add_option("--points", thr.spec.operating_points, "Operating points per cell, fastest to least energy")
      ->capture_default_str()->check(CLI::Range(1, 100));
  throughputs_cmd->add_flag("--refine", thr.spec.refine, "Refine each frontier (slower; a little less energy)");
  throughputs_cmd->add_option("-o,--out", thr.out, "Write the matrix CSV here (atomically)");
  throughputs_cmd->add_flag("--force", thr.force, "Replace --out if it exists");
  throughputs_cmd->add_flag("--json", thr.json, "Print every cell as JSON");
  throughputs_cmd->add_flag("--csv", thr.csv, "Print the matrix CSV");
  throughputs_cmd->add_flag("-q,--quiet", thr.quiet, "No progress");
  throughputs_cmd->callback([] { run_throughputs(thr); });

  static AllocateArgs alloc;
  CLI::App* allocate_cmd = cluster->add_subcommand("allocate", "One allocation: each job's share of time on each GPU type under a policy");
  allocate_cmd->footer(
      "Example: perseus cluster allocate --random 100 --gpus k80:36,p100:36,v100:36 --policy max-min-fairness\n"
      "         perseus cluster allocate --jobs jobs.csv --policy makespan --agnostic --json\n"
      "         perseus cluster allocate --random 18 --gpus k80:3,p100:3,v100:3 --policy hierarchical "
      "--entities product:1,research:2:fifo\n"
      "jobs.csv: a header with job (a type of the matrix, e.g. 'ResNet-50 (batch size 64) x1') and any of weight, "
      "steps, elapsed_s, slo_s, entity (hierarchical: the entity's name; --random deals jobs to entities round-robin).");
  allocate_cmd->add_option("--throughputs", alloc.throughputs,
                           "Throughput matrix: 'gavel' (Gavel's, bundled: the default), 'planned' (catalogue models on A40/A100/H100 "
                           "with energy, bundled), Gavel's JSON or a CSV job,scale_factor,gpu,steps_per_s[,joules_per_step]");
  allocate_cmd->add_option("--gpus", alloc.gpus, "GPUs per type, e.g. k80:36,p100:36,v100:36 (default: 36 of each)");
  allocate_cmd->add_option("--jobs", alloc.jobs, "The jobs, a CSV in arrival order")->check(CLI::ExistingFile);
  allocate_cmd->add_option("--random", alloc.random, "Or N jobs drawn as Gavel's simulator draws them")->check(CLI::Range(1, 1000000));
  allocate_cmd->add_option("--seed", alloc.seed, "Seed for --random")->capture_default_str();
  allocate_cmd->add_option("--policy", alloc.policy,
                           "max-min-fairness (las), fifo, makespan, finish-time-fairness (ftf), shortest-job-first (sjf), "
                           "max-throughput, min-cost, min-cost-slo, hierarchical")
      ->capture_default_str();
  allocate_cmd->add_option("--entities", alloc.entities,
                           "Hierarchical: NAME[:WEIGHT[:fairness|fifo]],... (weighted fairness across entities, each "
                           "sharing among its jobs by fairness or FIFO; default: the jobs file's names, weight 1, fairness)");
  allocate_cmd->add_flag("--agnostic", alloc.agnostic, "Heterogeneity-agnostic: every GPU type alike (the baseline)");
  allocate_cmd->add_option("--prices", alloc.prices,
                           "$ per GPU-hour, e.g. k80:0.9,p100:1.46,v100:3.06 (the defaults) for min-cost and min-cost-slo");
  allocate_cmd->add_option("--energy-slack", alloc.energy_slack,
                           "Then minimise the cluster's power, every job keeping 1 - SLACK of its throughput (needs a "
                           "matrix with energy, e.g. from `perseus cluster throughputs`)")
      ->check(CLI::Range(0.0, 0.999999));
  allocate_cmd->add_flag("--space-sharing", alloc.space_sharing,
                         "Let pairs of jobs share GPUs where that beats taking turns (aware; needs pair throughputs: Gavel's)");
  allocate_cmd->add_option("--reference-gpu", alloc.reference_gpu,
                           "GPU type --random durations are measured on (default: v100, else the first that runs every "
                           "single-GPU job)");
  allocate_cmd->add_flag("--json", alloc.json, "Print JSON");
  allocate_cmd->add_flag("--csv", alloc.csv, "Print one CSV row per job");
  allocate_cmd->callback([] { run_allocate(alloc); });

  static SimulateArgs sim;
  CLI::App* simulate_cmd = cluster->add_subcommand(
      "simulate", "Gavel's simulator: jobs arrive, a policy allocates, 6-minute rounds realise it; JCT, makespan, utilisation");
  simulate_cmd->footer(
      "Examples:\n"
      "  perseus cluster simulate --compare --lambda 2,4,6 --out las/      (Fig. 5.9: aware vs agnostic LAS)\n"
      "  perseus cluster simulate --trace static --jobs 100 --policy makespan --policy fifo --agnostic\n"
      "  perseus cluster simulate --trace jobs.csv --policy ftf --json\n"
      "Traces: continuous-single (every job 1 GPU), continuous-multiple (70% 1 GPU, 25% 2 or 4, 5% 8), both Poisson "
      "at --lambda; static (--jobs at time 0); cost (the dissertation's cost workload: --jobs ResNet-50 and A3C jobs at "
      "time 0, 0.5 to 8 days each, SLOs of 1.2, 2 or 10 times that); or a CSV with job, steps and optionally arrival_s, "
      "weight, slo_s (a jobs.csv written by --out replays). Durations: 10^x minutes on --reference-gpu (Gavel's V100), "
      "x ~ U[1.5, 3] w.p. 0.8 else U[3, 4].\n"
      "Energy: with a matrix that has energy per step (--throughputs planned, or `perseus cluster throughputs`), every "
      "run reports its jobs' energy, and --energy-slack off,0.1 adds the energy stage (each job keeps 90% of its "
      "throughput, the cluster's power minimised).\n"
      "Space sharing: --space-sharing off,on runs each aware policy without and with pairs of jobs sharing a GPU "
      "(Gavel's matrix has their throughputs).\n"
      "Hierarchical: --policy hierarchical --entities product:1,research:2:fifo shares the cluster across entities by "
      "weight, each among its jobs by fairness or FIFO (water filling; jobs dealt round-robin).\n"
      "Continuous traces measure the last fifth of --jobs (default 5000: jobs 4000 to 5000, as the dissertation) "
      "and keep jobs arriving until those finish.");
  simulate_cmd->add_option("--throughputs", sim.throughputs, "Throughput matrix: 'gavel' (the default), 'planned' (with energy), Gavel's JSON or a CSV");
  simulate_cmd->add_option("--gpus", sim.gpus, "GPUs per type, e.g. k80:36,p100:36,v100:36 (default: 36 of each)");
  simulate_cmd->add_option("--gpus-per-server", sim.gpus_per_server, "GPUs per server, for placing multi-GPU jobs")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  simulate_cmd->add_option("--policy", sim.policies,
                           "max-min-fairness (las), fifo, makespan, finish-time-fairness (ftf), shortest-job-first (sjf), "
                           "max-throughput, min-cost, min-cost-slo, hierarchical; repeat to compare")
      ->capture_default_str();
  simulate_cmd->add_option("--entities", sim.entities,
                           "Hierarchical: NAME[:WEIGHT[:fairness|fifo]],...; jobs are dealt to them round-robin unless the "
                           "trace CSV has an entity column");
  simulate_cmd->add_flag("--agnostic", sim.agnostic, "Heterogeneity-agnostic policies (the baselines)");
  simulate_cmd->add_flag("--compare", sim.compare, "Each policy both heterogeneity-aware and -agnostic");
  simulate_cmd->add_option("--prices", sim.prices,
                           "$ per GPU-hour, e.g. k80:0.9,p100:1.46,v100:3.06 (the defaults): the cost policies and each run's cost");
  simulate_cmd->add_option("--energy-slack", sim.energy_slack,
                           "Energy stage: 'off', or shares of throughput each job may give up so the cluster draws less "
                           "power; comma-separated, one run each (e.g. off,0,0.1; needs a matrix with energy)")
      ->capture_default_str();
  simulate_cmd->add_option("--space-sharing", sim.space_sharing,
                           "'off', 'on' (pairs of jobs share GPUs where that beats taking turns; aware policies, Gavel's "
                           "matrix) or 'off,on' (one run each)")
      ->capture_default_str();
  simulate_cmd->add_option("--reference-gpu", sim.reference_gpu,
                           "GPU type drawn jobs' durations are measured on (default: v100, else the first that runs every "
                           "single-GPU job)");
  simulate_cmd->add_option("--trace", sim.trace, "continuous-single, continuous-multiple, static, cost, or a trace CSV")
      ->capture_default_str();
  simulate_cmd->add_option("--lambda", sim.lambda, "Arrival rate(s) in jobs/hour, comma-separated: one run each")
      ->capture_default_str();
  simulate_cmd->add_option("--jobs", sim.jobs, "Jobs in the trace (continuous: 5000; static: 100; cost: 500)")->check(CLI::Range(1, 10000000));
  simulate_cmd->add_option("--window", sim.window, "The jobs measured, FIRST:END by arrival (default: the last fifth of --jobs)");
  simulate_cmd->add_option("--seeds", sim.seeds, "Seeds per rate")->capture_default_str()->check(CLI::Range(1, 1000));
  simulate_cmd->add_option("--seed", sim.seed, "First seed")->capture_default_str();
  simulate_cmd->add_option("--round", sim.round_s, "Round length (s)")->capture_default_str();
  simulate_cmd->add_option("--restart-overhead", sim.restart_overhead_s,
                           "Seconds lost when a job starts on GPUs it did not hold the round before")
      ->capture_default_str();
  simulate_cmd->add_option("--max-days", sim.max_days, "Stop a run after this much simulated time")->capture_default_str();
  simulate_cmd->add_option("-o,--out", sim.out, "Write report.html, summary.json, runs.csv, jobs.csv, rounds.csv and SVGs here");
  simulate_cmd->add_flag("--force", sim.force, "Replace --out if it exists");
  simulate_cmd->add_flag("--json", sim.json, "Print the summary as JSON");
  simulate_cmd->add_flag("--csv", sim.csv, "Print one CSV row per run");
  simulate_cmd->add_flag("-q,--quiet", sim.quiet, "No progress messages");
  simulate_cmd->callback([] { run_simulate(sim); });
  static RunArgs run;
  CLI::App* run_cmd = cluster->add_subcommand(
      "run", "Gavel on a live cluster: submit a jobs file, allocate every round, run the leases on Slurm (or an emulated cluster)");
  run_cmd->footer(
      "Each round (--round, Gavel's 6 minutes) the policy reallocates when jobs, nodes or measured throughputs changed, the "
      "round-based mechanism picks leases, and the backend runs them: the slurm backend submits one held batch job per job, "
      "releases it on the lease's nodes, requeues it (SIGTERM: it checkpoints) when its lease ends; a job that ran through a whole "
      "round measures its steps/s, which moves the matrix's figure (an average over measurements). Nodes are read from Slurm (GRES gpu:TYPE:N).\n"
      "jobs.csv: job, steps (required), weight, slo_s, entity, command (the slurm backend: a shell command line, no commas).\n"
      "A job's contract (docs/cluster.md): it resumes from its checkpoint in $PERSEUS_JOB_DIR, writes its steps done to "
      "$PERSEUS_JOB_DIR/progress, checkpoints and exits 0 on SIGTERM, exits 0 after $PERSEUS_STEPS.\n"
      "Examples:\n"
      "  perseus cluster run --jobs jobs.csv --gpus k80:4,p100:4,v100:4        (emulated: rounds without waiting)\n"
      "  perseus cluster run --backend slurm --jobs jobs.csv --job-dir /shared/perseus-jobs --json");
  add_live_options(run_cmd, run);
  run_cmd->add_option("--jobs", run.jobs, "The jobs, a CSV")->required()->check(CLI::ExistingFile);
  run_cmd->add_option("--max-rounds", run.max_rounds, "Stop after this many rounds (unfinished jobs: requeued in hold)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  run_cmd->add_flag("--json", run.json, "Print the jobs and the measured throughputs as JSON");
  run_cmd->add_flag("--csv", run.csv, "Print one CSV row per job");
  run_cmd->add_flag("-q,--quiet", run.quiet, "No line per round");
  run_cmd->callback([] { run_live(run); });

  static ServeArgs serve;
  CLI::App* serve_cmd = cluster->add_subcommand(
      "serve", "Gavel on a live cluster as a server: jobs submitted over HTTP/JSON, rounds run while there are jobs, state in SQLite");
  serve_cmd->footer(
      "Routes (JSON; POST and DELETE need 'Authorization: Bearer TOKEN' when --token is set):\n"
      "  GET  /healthz, /status (policy, rounds, GPUs up, jobs per status, the last error)\n"
      "  POST /jobs  {\"type\": \"ResNet-50 (batch size 64) x1\", \"steps\": 20000, \"weight\": 1, \"slo_s\": 86400, "
      "\"entity\": \"product\", \"command\": \"python train.py\"}  (type and steps required; command: the slurm backend's)\n"
      "  GET  /jobs[?status=waiting|running|finished|failed|cancelled], /jobs/ID\n"
      "  DELETE /jobs/ID  (202; the job is cancelled when the round in progress ends: stopped for good, never requeued)\n"
      "  GET  /allocation (each job's share of time per GPU type, the last round's leases), /throughputs (given and measured)\n"
      "Rounds run while jobs wait or run, as `cluster run` runs them (the emulated backend paced at --round / --speedup of wall "
      "time). On SIGINT or SIGTERM the server stops, unfinished jobs checkpoint and are held; started again on the same --db it "
      "picks them up with their progress and the measured throughputs.\n"
      "Examples:\n"
      "  perseus cluster serve --gpus k80:4,p100:4,v100:4 --round 60 --speedup 60     (emulated: a round a second)\n"
      "  perseus cluster serve --backend slurm --job-dir /shared/perseus-jobs --token $TOKEN --host 0.0.0.0\n"
      "  curl -X POST localhost:7788/jobs -d '{\"type\": \"ResNet-50 (batch size 64) x1\", \"steps\": 20000}'");
  add_live_options(serve_cmd, serve);
  serve_cmd->add_option("--host", serve.host, "Address to listen on (0.0.0.0 to listen beyond this host)")->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "TCP port (0: any free one, logged)")->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--db", serve.db, "SQLite database of the jobs and measured throughputs (':memory:' keeps nothing)")
      ->capture_default_str();
  serve_cmd->add_option("--token", serve.token, "Bearer token that POST /jobs requires")->envname("PERSEUS_TOKEN");
  serve_cmd->add_option("--speedup", serve.speedup, "Emulated: rounds run this many times faster than the wall clock")
      ->capture_default_str()->check(CLI::Range(1e-3, 1e9));
  serve_cmd->add_option("--log-level", serve.log_level, "notset, debug, info, warning, error, critical or off")->capture_default_str();
  serve_cmd->callback([] { run_serve(serve); });
}

}  // namespace perseus::cli
