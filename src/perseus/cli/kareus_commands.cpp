// `perseus kareus space` and `perseus kareus frontier`: Kareus's partitions of a layer, the knob
// space of each, and each partition's exhaustive time-energy frontier on the emulated GPU.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/kareus/compose.hpp"
#include "perseus/kareus/evaluator.hpp"
#include "perseus/kareus/external_evaluator.hpp"
#include "perseus/kareus/knob_space.hpp"
#include "perseus/kareus/measured.hpp"
#include "perseus/kareus/mbo.hpp"
#include "perseus/kareus/search.hpp"
#include "perseus/kareus/workload.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/model/statistics.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/report/figures.hpp"

namespace perseus::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct WorkloadArgs {
  std::string model = "llama3.2-3b";
  std::string gpu = "a100-sxm";
  int tp = 8, cp = 1, pp = 2;
  int microbatch_size = 8;
  int seq_len = 4096;
  int microbatches = 8;
  int min_mhz = 900;
  int max_sms = 30;
};

struct SpaceArgs {
  WorkloadArgs workload;
  bool json = false;
};

struct SearchArgs {
  WorkloadArgs workload;
  bool exhaustive = false;
  std::uint64_t seed = 1;
  std::string evaluator;
  double timeout = 600.0;
  std::string samples;
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

struct CalibrateArgs {
  std::string measured = "data/kareus";
  std::string gpu = "a100-sxm";
  int block_size = 1024;
  bool json = false;
};

struct CompareArgs {
  WorkloadArgs workload;
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

struct FrontierArgs {
  WorkloadArgs workload;
  std::string evaluator;  // a command (external evaluator); empty: the emulated GPU
  double timeout = 600.0;
  std::string samples;    // appended as samples arrive; read back to resume
  std::string partition;
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

void add_workload_flags(CLI::App* cmd, WorkloadArgs& a) {
  cmd->add_option("--model", a.model, "A Transformer of the catalogue (perseus models), e.g. llama3.2-3b, qwen3-1.7b")
      ->capture_default_str();
  cmd->add_option("--gpu", a.gpu, "A GPU of the catalogue (perseus gpus)")->capture_default_str();
  cmd->add_option("--tp", a.tp, "Tensor parallelism")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--cp", a.cp, "Context parallelism")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--pp", a.pp, "Pipeline parallelism (layers per stage = layers / pp)")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--microbatch-size", a.microbatch_size, "Sequences per microbatch (two nanobatches)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seq-len", a.seq_len, "Tokens per sequence")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--microbatches", a.microbatches, "Microbatches per iteration")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--min-mhz", a.min_mhz, "Lowest clock searched (the paper: 900 on A100)")->capture_default_str();
  cmd->add_option("--max-sms", a.max_sms, "Most SMs the collective may take (the paper: 30 on A100)")->capture_default_str();
}

kareus::Workload workload_of(const WorkloadArgs& a) {
  return {planner::find_model(a.model), planner::find_gpu(a.gpu), a.tp, a.cp, a.pp, a.microbatch_size, a.seq_len,
          a.microbatches};
}

json kernel_json(const kareus::Kernel& k, const planner::GpuSpec& gpu) {
  return {{"name", k.name}, {"flops", k.flops}, {"bytes", k.bytes}, {"memory_bound", k.memory_bound(gpu)}};
}

void run_space(const SpaceArgs& a) {
  const kareus::Workload w = workload_of(a.workload);
  const auto parts = kareus::layer_partitions(w);
  json out = {{"model", w.model.name}, {"gpu", w.gpu.name}, {"tp", w.tensor_parallel}, {"cp", w.context_parallel},
              {"pp", w.pipeline_parallel}, {"microbatch_size", w.microbatch_size}, {"seq_len", w.seq_len}};
  json partitions = json::array();
  std::size_t layer = 0;
  for (const kareus::Partition& p : parts) {
    const kareus::KnobSpace space = kareus::knob_space(w.gpu, p, a.workload.min_mhz, a.workload.max_sms);
    layer += space.size();
    json kernels = json::array();
    for (const kareus::Kernel& k : p.compute) kernels.push_back(kernel_json(k, w.gpu));
    partitions.push_back({{"name", p.name}, {"forward", p.forward}, {"kernels", kernels},
                          {"collective", {{"name", p.comm.name}, {"bus_bytes", p.comm.bus_bytes}}},
                          {"per_microbatch", p.per_microbatch}, {"clocks", space.clocks().size()},
                          {"max_sms", space.max_sms()}, {"windows", space.windows()}, {"configurations", space.size()}});
  }
  out["partitions"] = partitions;
  out["configurations"] = layer;
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{} on {}: TP {} x CP {} x PP {}, microbatch {} x {} tokens (nanobatches of {})\n", w.model.name,
             w.gpu.name, w.tensor_parallel, w.context_parallel, w.pipeline_parallel, w.microbatch_size, w.seq_len,
             w.microbatch_size / 2);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const kareus::Partition& p = parts[i];
    const json& j = partitions[i];
    fmt::print("\n{} ({}), {} per microbatch: collective {} of {:.1f} MB on the links\n", p.name,
               p.forward ? "forward" : "backward", p.per_microbatch, p.comm.name, p.comm.bus_bytes / 1e6);
    for (std::size_t k = 0; k < p.compute.size(); ++k) {
      const kareus::Kernel& kernel = p.compute[k];
      fmt::print("  {} {:<22} {:>9.2f} GFLOP {:>9.2f} MB  {}\n", k, kernel.name, kernel.flops / 1e9, kernel.bytes / 1e6,
                 kernel.memory_bound(w.gpu) ? "memory-bound" : "compute-bound");
    }
    fmt::print("  knobs: {} clocks x ({} SM counts x {} windows + sequential) = {} configurations\n",
               j["clocks"].get<std::size_t>(), j["max_sms"].get<int>(), j["windows"].get<std::size_t>(),
               j["configurations"].get<std::size_t>());
  }
  fmt::print("\nOne layer: {} configurations over {} partitions (the Kareus paper counts 85,050 = 35 clocks x 30 SMs x "
             "81 launch timings for a typical layer on A100; docs/kareus.md compares the two counts)\n",
             layer, parts.size());
}

const char* kSamplesHeader = "partition,index,clock_mhz,comm_sms,first,last,time_s,dynamic_j,static_j,total_j,effective_mhz\n";

std::string sample_row(const std::string& label, const kareus::Sample& s) {
  const kareus::Measurement& m = s.measurement;
  return fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.1f}\n", label, s.index, s.config.clock_mhz,
                     s.config.comm_sms, s.config.first, s.config.last, m.time_s, m.dynamic_j, m.static_j, m.total_j(),
                     m.effective_mhz);
}

// The samples of partition `label` in a samples file (to resume a search). InputError naming
// the line for a malformed row.
std::vector<kareus::Sample> read_samples(const std::string& path, const std::string& label) {
  std::vector<kareus::Sample> out;
  if (!fs::exists(path) || fs::file_size(path) == 0) return out;
  static constexpr std::string_view kColumns[] = {"partition", "index", "clock_mhz", "comm_sms", "first", "last",
                                                  "time_s", "dynamic_j", "static_j", "total_j", "effective_mhz"};
  const csv::Table table = csv::parse(csv::read_file(path), path, kColumns);
  const auto column = [&](std::string_view name) { return table.column(name); };
  for (const csv::Row& row : table.rows) {
    if (row.fields[static_cast<std::size_t>(column("partition"))] != label) continue;
    const auto integer = [&](std::string_view name, long long lo, long long hi) {
      return csv::parse_integer(table, row, column(name), lo, hi, "a whole number");
    };
    const auto number = [&](std::string_view name) { return csv::parse_finite(table, row, column(name)); };
    kareus::Sample s;
    s.index = static_cast<std::size_t>(integer("index", 0, 1LL << 40));
    s.config = {static_cast<int>(integer("clock_mhz", 1, 100000)), static_cast<int>(integer("comm_sms", 1, 100000)),
                static_cast<int>(integer("first", -1, 100000)), static_cast<int>(integer("last", -1, 100000))};
    s.measurement = {number("time_s"), number("dynamic_j"), number("static_j"), number("effective_mhz")};
    out.push_back(s);
  }
  return out;
}

// The emulated GPU, or the command given to measure with.
std::unique_ptr<kareus::Evaluator> make_evaluator(const std::string& command, double timeout, const planner::GpuSpec& gpu) {
  if (command.empty()) return std::make_unique<kareus::EmulatedGpu>(gpu);
  return std::make_unique<kareus::ExternalEvaluator>(command, timeout);
}

// --samples FILE opened for appending (with the header when new); closed when not given.
std::ofstream open_samples(const std::string& path) {
  std::ofstream file;
  if (path.empty()) return file;
  const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
  file.open(path, std::ios::app);
  if (!file) throw InputError(fmt::format("--samples {}: cannot open it for appending", path));
  if (fresh) file << kSamplesHeader << std::flush;
  return file;
}

// A failed evaluator as the user's error, with what was kept and how to resume.
InputError evaluator_failure(const kareus::EvaluatorError& e, std::size_t fresh, const std::string& label,
                             const std::string& samples) {
  return InputError(fmt::format("{}; {} samples of {} measured this run{}", e.what(), fresh, label,
                                samples.empty() ? std::string(" (give --samples FILE to keep them and resume)")
                                                : fmt::format(", kept in {}: run the same command again to resume",
                                                              samples)));
}

void run_frontier(const FrontierArgs& a) {
  const kareus::Workload w = workload_of(a.workload);
  const auto parts = kareus::layer_partitions(w);
  const std::unique_ptr<kareus::Evaluator> evaluator = make_evaluator(a.evaluator, a.timeout, w.gpu);
  kareus::Evaluator& gpu = *evaluator;
  kareus::EmulatedGpu emulated(w.gpu);  // the sequential reference line
  std::ofstream samples_file = open_samples(a.samples);
  json out = {{"model", w.model.name}, {"gpu", w.gpu.name}, {"evaluator", gpu.name()}};
  json results = json::array();
  std::vector<std::pair<std::string, std::string>> files;
  std::string samples_csv = kSamplesHeader;
  std::string frontier_csv = "partition,index,clock_mhz,comm_sms,first,last,time_s,total_j,schedule\n";
  bool found = a.partition.empty();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const kareus::Partition& p = parts[i];
    const std::string label = fmt::format("{}-{}", p.forward ? "forward" : "backward", p.name);
    if (!a.partition.empty() && a.partition != label && a.partition != std::to_string(i)) continue;
    found = true;
    const kareus::KnobSpace space = kareus::knob_space(w.gpu, p, a.workload.min_mhz, a.workload.max_sms);
    kareus::ResumableSearch search;
    if (!a.samples.empty()) search.known = read_samples(a.samples, label);
    std::size_t fresh = 0;
    search.on_sample = [&](const kareus::Sample& s) {
      ++fresh;
      if (samples_file.is_open()) samples_file << sample_row(label, s) << std::flush;
    };
    search.progress = [&](std::size_t done, std::size_t total) {
      if (!a.quiet && !a.json && (done == total || !a.evaluator.empty())) {
        fmt::print(stderr, "perseus: {}: {}/{} configurations evaluated\n", label, done, total);
      }
    };
    kareus::PartitionFrontier f;
    try {
      f = kareus::exhaustive_search(p, space, gpu, std::move(search));
    } catch (const kareus::EvaluatorError& e) {
      throw evaluator_failure(e, fresh, label, a.samples);
    }
    const kareus::Measurement sequential = emulated.evaluate(p, kareus::Config{w.gpu.max_mhz, space.max_sms(), -1, -1});
    const kareus::Sample& fastest = f.samples[f.total.front().id];
    const kareus::Sample& cheapest = f.samples[f.total.back().id];
    for (const kareus::Sample& s : f.samples) samples_csv += sample_row(label, s);
    json front = json::array();
    for (const kareus::TradeoffPoint& t : f.total) {
      const kareus::Sample& s = f.samples[t.id];
      frontier_csv += fmt::format("{},{},{},{},{},{},{:.9f},{:.6f},\"{}\"\n", label, s.index, s.config.clock_mhz,
                                  s.config.comm_sms, s.config.first, s.config.last, t.time_s, t.energy_j,
                                  kareus::describe(s.config, p));
      front.push_back({{"time_s", t.time_s}, {"total_j", t.energy_j}, {"schedule", kareus::describe(s.config, p)}});
    }
    results.push_back({{"partition", label}, {"configurations", space.size()}, {"frontier_points", f.total.size()},
                       {"hypervolume", f.hypervolume_total},
                       {"sequential_top_clock", {{"time_s", sequential.time_s}, {"total_j", sequential.total_j()}}},
                       {"fastest", {{"time_s", fastest.measurement.time_s}, {"total_j", fastest.measurement.total_j()},
                                    {"schedule", kareus::describe(fastest.config, p)}}},
                       {"least_energy", {{"time_s", cheapest.measurement.time_s}, {"total_j", cheapest.measurement.total_j()},
                                         {"schedule", kareus::describe(cheapest.config, p)}}},
                       {"frontier", front}});
    if (!a.json) {
      fmt::print("{}: {} configurations, {} on the frontier\n", label, space.size(), f.total.size());
      fmt::print("  sequential at {} MHz (emulated): {:.1f} us, {:.4f} J\n", w.gpu.max_mhz, 1e6 * sequential.time_s,
                 sequential.total_j());
      fmt::print("  fastest:      {:.1f} us, {:.4f} J  ({})\n", 1e6 * fastest.measurement.time_s,
                 fastest.measurement.total_j(), kareus::describe(fastest.config, p));
      fmt::print("  least energy: {:.1f} us, {:.4f} J  ({})\n", 1e6 * cheapest.measurement.time_s,
                 cheapest.measurement.total_j(), kareus::describe(cheapest.config, p));
    }
  }
  if (!found) {
    std::string names;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      names += fmt::format("{}{} ({}-{})", i ? ", " : "", i, parts[i].forward ? "forward" : "backward", parts[i].name);
    }
    throw InputError(fmt::format("--partition {}: no such partition; the layer has {}", a.partition, names));
  }
  out["partitions"] = results;
  if (!a.out.empty()) {
    files = {{"samples.csv", samples_csv}, {"frontier.csv", frontier_csv}, {"frontier.json", out.dump(1) + "\n"}};
    write_directory_atomically(a.out, a.force, files);
    if (!a.json) fmt::print("Wrote {}/{{samples.csv, frontier.csv, frontier.json}}\n", a.out);
  }
  if (a.json) std::cout << out.dump(2) << "\n";
}

void run_search(const SearchArgs& a) {
  const auto started = std::chrono::steady_clock::now();
  const kareus::Workload w = workload_of(a.workload);
  const auto parts = kareus::layer_partitions(w);
  const std::unique_ptr<kareus::Evaluator> evaluator = make_evaluator(a.evaluator, a.timeout, w.gpu);
  kareus::EmulatedGpu emulated(w.gpu);  // the stage's embedding and LM head
  std::ofstream samples_file = open_samples(a.samples);
  const bool quiet = a.quiet || a.json;
  std::vector<kareus::PartitionFrontier> frontiers;
  std::string samples_csv = kSamplesHeader;
  std::string fronts_csv = "partition,pass,index,clock_mhz,comm_sms,first,last,time_s,total_j,dynamic_j,schedule\n";
  json partitions = json::array();
  for (const kareus::Partition& p : parts) {
    const std::string label = fmt::format("{}-{}", p.forward ? "forward" : "backward", p.name);
    const kareus::KnobSpace space = kareus::knob_space(w.gpu, p, a.workload.min_mhz, a.workload.max_sms);
    kareus::ResumableSearch io;
    if (!a.samples.empty()) io.known = read_samples(a.samples, label);
    std::size_t fresh = 0;
    io.on_sample = [&](const kareus::Sample& s) {
      ++fresh;
      if (samples_file.is_open()) samples_file << sample_row(label, s) << std::flush;
    };
    // A progress line rewritten in place on a terminal; elsewhere one line per partition.
    const bool terminal = ::isatty(STDERR_FILENO) != 0;
    io.progress = [&](std::size_t done, std::size_t total) {
      if (!quiet && terminal && (done % 32 == 0 || done == total)) {
        fmt::print(stderr, "\rperseus: {}: {} of {} configurations measured", label, done, total);
      }
    };
    kareus::PartitionFrontier f;
    std::vector<kareus::SamplePass> passes;
    int batches = 0;
    try {
      if (a.exhaustive) {
        f = kareus::exhaustive_search(p, space, *evaluator, std::move(io));
      } else {
        kareus::MboOptions options;
        options.seed = a.seed;
        kareus::MboResult r = kareus::mbo_search(p, space, *evaluator, options, std::move(io));
        f = std::move(r.frontier);
        passes = std::move(r.pass);
        batches = r.batches;
      }
    } catch (const kareus::EvaluatorError& e) {
      throw evaluator_failure(e, fresh, label, a.samples);
    }
    if (!quiet) {
      fmt::print(stderr, "{}perseus: {}: {} of {} configurations measured\n", terminal ? "\r" : "", label,
                 f.samples.size(), space.size());
    }
    for (const kareus::Sample& s : f.samples) samples_csv += sample_row(label, s);
    for (const kareus::TradeoffPoint& t : f.total) {
      const kareus::Sample& s = f.samples[t.id];
      fronts_csv += fmt::format("{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},\"{}\"\n", label,
                                passes.empty() ? "exhaustive" : kareus::to_string(passes[t.id]), s.index,
                                s.config.clock_mhz, s.config.comm_sms, s.config.first, s.config.last, t.time_s,
                                t.energy_j, s.measurement.dynamic_j, kareus::describe(s.config, p));
    }
    partitions.push_back({{"partition", label}, {"configurations", space.size()}, {"measured", f.samples.size()},
                          {"measured_share", static_cast<double>(f.samples.size()) / space.size()},
                          {"batches", batches}, {"frontier_points", f.total.size()}});
    frontiers.push_back(std::move(f));
  }
  // Composition and the iteration frontier.
  const Profile profile = kareus::method_profile(w, parts, frontiers, kareus::Method::kKareus, emulated);
  const SolveRequest request = kareus::iteration_request(w, profile);
  if (!quiet) fmt::print(stderr, "perseus: composing {} partitions and solving the iteration frontier\n", parts.size());
  const Solution solution = solve(profile, request);
  const Frontier& frontier = solution.frontier;
  json out = {{"model", w.model.name}, {"gpu", w.gpu.name}, {"evaluator", evaluator->name()},
              {"search", a.exhaustive ? "exhaustive" : "mbo"}, {"seed", a.seed}, {"partitions", partitions},
              {"iteration", {{"points", frontier.points.size()},
                             {"t_min_s", frontier.t_min_point().measured.time_s},
                             {"t_min_energy_j", frontier.t_min_point().measured.energy_j},
                             {"t_star_s", frontier.t_star_point().measured.time_s},
                             {"t_star_energy_j", frontier.t_star_point().measured.energy_j}}}};
  const std::string profile_text = kareus::profile_csv(profile);
  write_directory_atomically(a.out, a.force, [&](const fs::path& staging) {
    const auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream file(staging / name, std::ios::binary);
      file << text;
      if (!file) throw InputError(fmt::format("{}: cannot write {}", a.out, name));
    };
    write("samples.csv", samples_csv);
    write("partition_frontiers.csv", fronts_csv);
    write("profile.csv", profile_text);
    write("search.json", out.dump(1) + "\n");
    // plans.bin keeps each instruction's clock; which schedule each partition ran is here, per
    // frontier point and instruction (the knob of the option the plan chose).
    std::string schedules = "point,stage,instruction,microbatch,frequency,schedule\n";
    const EnergyProblem& problem = solution.problem;
    for (std::size_t i = 0; i < frontier.points.size(); ++i) {
      const OptionChoice choice = frontier.points[i].option_choice();
      for (int stage = 0; stage < problem.dag.num_stages(); ++stage) {
        for (Dag::NodeId n : problem.dag.stage_nodes(stage)) {
          const perseus::Measurement& m = problem.chosen(n, choice).measurement;
          const std::size_t at = m.knob.find("|schedule=");
          schedules += fmt::format("{},{},{},{},{},{}\n", i, stage, perseus::to_string(problem.dag.instruction(n).kind),
                                   problem.dag.instruction(n).microbatch, m.frequency_mhz,
                                   at == std::string::npos ? std::string() : m.knob.substr(at + 10));
        }
      }
    }
    write("plan_schedules.csv", schedules);
    RunInfo info{(fs::path(a.out) / "profile.csv").string(), solution.schedule, solution.solve_seconds(), {}};
    OutputOptions output;
    output.force = false;
    write_frontier_directory(staging / "frontier", solution.problem, solution.crawl, frontier, info, output);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out["seconds"] = seconds;
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{} on {} (TP {} x CP {} x PP {}, {} microbatches of {} x {}), {} search on the {}:\n", w.model.name,
             w.gpu.name, w.tensor_parallel, w.context_parallel, w.pipeline_parallel, w.microbatches, w.microbatch_size,
             w.seq_len, a.exhaustive ? "exhaustive" : "MBO", evaluator->name());
  for (const json& p : partitions) {
    fmt::print("  {:<36} {:>5} of {:>6} configurations measured ({:.2f}%), {} on its front\n",
               p["partition"].get<std::string>(), p["measured"].get<std::size_t>(), p["configurations"].get<std::size_t>(),
               100 * p["measured_share"].get<double>(), p["frontier_points"].get<std::size_t>());
  }
  fmt::print("Iteration frontier: {} plans, T_min {:.4f} s ({:.1f} J), T* {:.4f} s ({:.1f} J); {:.1f} s in all\n",
             frontier.points.size(), frontier.t_min_point().measured.time_s, frontier.t_min_point().measured.energy_j,
             frontier.t_star_point().measured.time_s, frontier.t_star_point().measured.energy_j, seconds);
  fmt::print("Wrote {}/{{samples.csv, partition_frontiers.csv, profile.csv, plan_schedules.csv, search.json, frontier/}}\n",
             a.out);
}

// Every measured space in `dir`: NAME-<N>mhz.csv at N MHz, NAME-default-clock.csv at the top clock.
std::vector<kareus::MeasuredConfig> read_measured_dir(const std::string& dir, const planner::GpuSpec& gpu,
                                                      std::vector<std::string>* files) {
  if (!fs::is_directory(dir)) throw InputError(fmt::format("--measured {}: not a directory", dir));
  std::vector<kareus::MeasuredConfig> rows;
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(dir)) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& path : paths) {
    const std::string name = path.filename().string();
    int clock = 0;
    if (name.ends_with("-default-clock.csv")) {
      clock = gpu.max_mhz;
    } else if (name.ends_with("mhz.csv")) {
      const std::size_t dash = name.rfind('-');
      try {
        clock = std::stoi(name.substr(dash + 1));
      } catch (const std::exception&) {
        continue;
      }
    } else {
      continue;
    }
    const auto read = kareus::read_measured_space(path, clock);
    rows.insert(rows.end(), read.begin(), read.end());
    files->push_back(fmt::format("{} ({} configurations at {} MHz)", name, read.size(), clock));
  }
  if (rows.empty()) throw InputError(fmt::format("--measured {}: no NAME-<N>mhz.csv or NAME-default-clock.csv in it", dir));
  return rows;
}

void run_calibrate(const CalibrateArgs& a) {
  const planner::GpuSpec& gpu = planner::find_gpu(a.gpu);
  std::vector<std::string> files;
  std::vector<kareus::MeasuredConfig> rows;
  for (kareus::MeasuredConfig& r : read_measured_dir(a.measured, gpu, &files)) {
    if (r.block_size == a.block_size) rows.push_back(r);
  }
  if (rows.empty()) throw InputError(fmt::format("--block-size {}: no configuration measured with it", a.block_size));
  const kareus::Partition p = kareus::measured_attention_partition();
  const kareus::Calibration c = kareus::calibrate(gpu, p, rows);
  std::vector<double> spreads;
  for (const auto& r : rows) spreads.push_back(r.spread);
  const double spread = median(std::move(spreads));
  const auto error_json = [](const kareus::ModelError& e) {
    return json{{"time_median", e.time_median}, {"time_worst", e.time_worst}, {"energy_median", e.energy_median},
                {"energy_worst", e.energy_worst}, {"time_rank_correlation", e.time_rank_correlation},
                {"fastest_pick_loss", e.fastest_pick_loss}};
  };
  // The best schedules measured and modelled, per clock.
  kareus::EmulatedGpu model(c.gpu, c.params);
  json best = json::array();
  std::set<int> clocks;
  for (const auto& r : rows) clocks.insert(r.config.clock_mhz);
  for (const int clock : clocks) {
    const kareus::MeasuredConfig* fastest = nullptr;
    const kareus::MeasuredConfig* cheapest = nullptr;
    const kareus::MeasuredConfig* model_fastest = nullptr;
    const kareus::MeasuredConfig* model_cheapest = nullptr;
    double mt = 1e300, me = 1e300;
    for (const auto& r : rows) {
      if (r.config.clock_mhz != clock) continue;
      if (!fastest || r.time_s < fastest->time_s) fastest = &r;
      if (!cheapest || r.energy_j < cheapest->energy_j) cheapest = &r;
      const kareus::Measurement m = model.evaluate(p, r.config);
      if (m.time_s < mt) mt = m.time_s, model_fastest = &r;
      if (m.total_j() < me) me = m.total_j(), model_cheapest = &r;
    }
    best.push_back({{"clock_mhz", clock},
                    {"measured_fastest", kareus::describe(fastest->config, p)},
                    {"measured_least_energy", kareus::describe(cheapest->config, p)},
                    {"model_fastest", kareus::describe(model_fastest->config, p)},
                    {"model_fastest_measured_s", model_fastest->time_s},
                    {"measured_fastest_s", fastest->time_s},
                    {"model_least_energy", kareus::describe(model_cheapest->config, p)},
                    {"model_least_energy_measured_j", model_cheapest->energy_j},
                    {"measured_least_energy_j", cheapest->energy_j}});
  }
  const json out = {{"measured", a.measured},
                    {"files", files},
                    {"block_size", a.block_size},
                    {"configurations", rows.size()},
                    {"repeat_spread_median", spread},
                    {"candidates", c.candidates},
                    {"params",
                     {{"sms_to_saturate_link", c.params.sms_to_saturate_link},
                      {"comm_memory_factor", c.params.comm_memory_factor},
                      {"gemm_efficiency", c.params.gemm_efficiency},
                      {"attention_efficiency", c.params.attention_efficiency},
                      {"memory_efficiency", c.params.memory_efficiency},
                      {"launch_s", c.params.launch_s},
                      {"dynamic_power_scale", c.dynamic_power_scale}}},
                    {"before", error_json(c.before)},
                    {"after", error_json(c.after)},
                    {"best", best}};
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{}: {} configurations (block size {}); repeats differ by {:.1f}% (median)\n", a.measured, rows.size(),
             a.block_size, 100 * spread);
  for (const std::string& f : files) fmt::print("  {}\n", f);
  fmt::print("Emulated {} against them ({} parameter sets tried):\n", gpu.name, c.candidates);
  const auto line = [](const char* what, const kareus::ModelError& e) {
    fmt::print("  {:<11} time error median {:>5.1f}%, worst {:>5.1f}%; energy median {:>5.1f}%, worst {:>5.1f}%; time rank "
               "correlation {:.2f}; its fastest pick {:.1f}% slower than the measured fastest\n",
               what, 100 * e.time_median, 100 * e.time_worst, 100 * e.energy_median, 100 * e.energy_worst,
               e.time_rank_correlation, 100 * e.fastest_pick_loss);
  };
  line("catalogue", c.before);
  line("calibrated", c.after);
  fmt::print("  fitted: link saturated by {:g} SMs, {:g} HBM byte(s) per byte sent, GEMM efficiency {:g}, attention {:g}, "
             "HBM {:g}, launch {:g} us, dynamic power x{:.2f}\n",
             c.params.sms_to_saturate_link, c.params.comm_memory_factor, c.params.gemm_efficiency,
             c.params.attention_efficiency, c.params.memory_efficiency, 1e6 * c.params.launch_s, c.dynamic_power_scale);
  for (const json& b : best) {
    fmt::print("  {} MHz: measured fastest {} ({:.3f} ms); the model's fastest {} measured {:.3f} ms\n",
               b["clock_mhz"].get<int>(), b["measured_fastest"].get<std::string>(), 1e3 * b["measured_fastest_s"].get<double>(),
               b["model_fastest"].get<std::string>(), 1e3 * b["model_fastest_measured_s"].get<double>());
    fmt::print("  {} MHz: measured least energy {} ({:.3f} J); the model's {} measured {:.3f} J\n",
               b["clock_mhz"].get<int>(), b["measured_least_energy"].get<std::string>(),
               b["measured_least_energy_j"].get<double>(), b["model_least_energy"].get<std::string>(),
               b["model_least_energy_measured_j"].get<double>());
  }
}

std::string percent(double fraction) {
  return std::isnan(fraction) ? std::string("-") : fmt::format("{:+.1f}%", 100 * fraction);
}

void run_compare(const CompareArgs& a) {
  const kareus::Workload w = workload_of(a.workload);
  const auto parts = kareus::layer_partitions(w);
  kareus::EmulatedGpu gpu(w.gpu);
  const bool quiet = a.quiet || a.json;
  std::vector<kareus::PartitionFrontier> frontiers;
  std::size_t evaluated = 0;
  for (const kareus::Partition& p : parts) {
    const kareus::KnobSpace space = kareus::knob_space(w.gpu, p, a.workload.min_mhz, a.workload.max_sms);
    frontiers.push_back(kareus::exhaustive_search(p, space, gpu));
    evaluated += space.size();
  }
  if (!quiet) fmt::print(stderr, "perseus: {} configurations of {} partitions evaluated on the {}\n", evaluated, parts.size(), gpu.name());
  const kareus::Comparison c = kareus::compare(w, parts, frontiers, gpu, [&](const std::string& message) {
    if (!quiet) fmt::print(stderr, "perseus: {}\n", message);
  });
  json methods = json::array();
  for (std::size_t i = 0; i < c.methods.size(); ++i) {
    const kareus::MethodResult& r = c.methods[i];
    json points = json::array();
    for (const FrontierPoint& p : r.solution.frontier.points) points.push_back({p.measured.time_s, p.measured.energy_j});
    methods.push_back({{"method", kareus::to_string(r.method)},
                       {"frontier_points", r.solution.frontier.points.size()},
                       {"frontier", points},
                       {"fastest", {{"time_s", r.fastest_time_s}, {"energy_j", r.fastest_energy_j}}},
                       {"least_energy_j", r.least_energy_j},
                       {"time_reduction_vs_megatron", c.time_reduction[i]},
                       {"energy_reduction_vs_megatron", c.energy_reduction[i]},
                       {"iso_time_energy_reduction_vs_megatron_perseus",
                        std::isnan(c.iso_time_energy_reduction[i]) ? json() : json(c.iso_time_energy_reduction[i])},
                       {"iso_energy_time_reduction_vs_megatron_perseus",
                        std::isnan(c.iso_energy_time_reduction[i]) ? json() : json(c.iso_energy_time_reduction[i])}});
  }
  json out = {{"model", w.model.name}, {"gpu", w.gpu.name}, {"tp", w.tensor_parallel}, {"cp", w.context_parallel},
              {"pp", w.pipeline_parallel}, {"microbatch_size", w.microbatch_size}, {"seq_len", w.seq_len},
              {"microbatches", w.microbatches}, {"evaluator", gpu.name()}, {"methods", methods}};
  if (!a.out.empty()) {
    std::vector<report::TradeoffSeries> series;
    for (const kareus::MethodResult& r : c.methods) {
      report::TradeoffSeries one{std::string(kareus::to_string(r.method)), {}};
      for (const FrontierPoint& p : r.solution.frontier.points) one.points.emplace_back(p.measured.time_s, p.measured.energy_j);
      series.push_back(std::move(one));
    }
    std::vector<std::pair<std::string, std::string>> files = {
        {"comparison.json", out.dump(1) + "\n"},
        {"frontiers.svg", report::tradeoff_curves_svg(fmt::format("{}: iteration frontiers of the four methods", w.model.name),
                                                      series)}};
    for (const kareus::MethodResult& r : c.methods) {
      std::string name(kareus::to_string(r.method));
      std::string file;
      for (char ch : name) file += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '-';
      while (file.find("--") != std::string::npos) file.replace(file.find("--"), 2, "-");
      files.emplace_back("profile-" + file + ".csv",
                         kareus::profile_csv(kareus::method_profile(w, parts, frontiers, r.method, gpu)));
    }
    write_directory_atomically(a.out, a.force, files);
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{} on {}: TP {} x CP {} x PP {}, microbatch {} x {} tokens, {} microbatches ({})\n", w.model.name,
             w.gpu.name, w.tensor_parallel, w.context_parallel, w.pipeline_parallel, w.microbatch_size, w.seq_len,
             w.microbatches, gpu.name());
  fmt::print("{:<24} {:>7} {:>11} {:>11} {:>10} {:>10} {:>12} {:>12}\n", "method", "points", "fastest s", "energy J",
             "time red.", "energy red.", "iso-time E", "iso-energy T");
  for (std::size_t i = 0; i < c.methods.size(); ++i) {
    const kareus::MethodResult& r = c.methods[i];
    fmt::print("{:<24} {:>7} {:>11.4f} {:>11.1f} {:>10} {:>10} {:>12} {:>12}\n", kareus::to_string(r.method),
               r.solution.frontier.points.size(), r.fastest_time_s, r.fastest_energy_j, percent(c.time_reduction[i]),
               percent(c.energy_reduction[i]), i >= 2 ? percent(c.iso_time_energy_reduction[i]) : std::string(""),
               i >= 2 ? percent(c.iso_energy_time_reduction[i]) : std::string(""));
  }
  fmt::print("Reductions: time and energy of each method's fastest plan against Megatron-LM (the paper's Table 4); "
             "energy within M+P's fastest time and time within M+P's least energy against Megatron-LM + Perseus "
             "(its Table 5). One pipeline's GPUs, one iteration.\n");
  if (!a.out.empty()) fmt::print("Wrote {}/{{comparison.json, frontiers.svg, profile-*.csv}}\n", a.out);
}

}  // namespace

void add_kareus_commands(CLI::App& app) {
  static SpaceArgs space_args;
  static FrontierArgs frontier_args;
  CLI::App* kareus = app.add_subcommand("kareus", "Kareus: kernel scheduling and GPU clock chosen together, per partition");
  kareus->require_subcommand(1);

  CLI::App* space = kareus->add_subcommand("space", "A layer's partitions, their kernels and the size of each knob space");
  space->footer("Example: perseus kareus space --model llama3.2-3b --gpu a100-sxm --tp 8 --microbatch-size 8 --seq-len 4096");
  add_workload_flags(space, space_args.workload);
  space->add_flag("--json", space_args.json, "Print as JSON");
  space->callback([] { run_space(space_args); });

  CLI::App* frontier = kareus->add_subcommand(
      "frontier", "Every configuration of each partition on the emulated GPU, and its time-energy frontier");
  frontier->footer("Example: perseus kareus frontier --model qwen3-1.7b --tp 8 --partition 0 --out kareus-frontier/");
  add_workload_flags(frontier, frontier_args.workload);
  frontier->add_option("--evaluator", frontier_args.evaluator,
                       "A command that measures configurations (JSON lines on stdin/stdout, docs/kareus.md); default: "
                       "the emulated GPU");
  frontier->add_option("--timeout", frontier_args.timeout, "Seconds one answer of --evaluator may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  frontier->add_option("--samples", frontier_args.samples,
                       "Append every sample to this CSV as it is measured; samples already in it are not measured "
                       "again (resume)");
  frontier->add_option("--partition", frontier_args.partition,
                       "One partition, by number or as forward-NAME / backward-NAME (default: all)");
  frontier->add_option("--out", frontier_args.out, "Directory for samples.csv, frontier.csv and frontier.json");
  frontier->add_flag("--force", frontier_args.force, "Replace an existing --out directory");
  frontier->add_flag("--json", frontier_args.json, "Print the frontiers as JSON");
  frontier->add_flag("-q,--quiet", frontier_args.quiet, "No progress messages");
  frontier->callback([] { run_frontier(frontier_args); });

  static SearchArgs search_args;
  CLI::App* search = kareus->add_subcommand(
      "search", "Search every partition (MBO), compose, and write the iteration frontier with its plans");
  search->footer(
      "Each partition searched by multi-pass MBO (XGBoost surrogates; --exhaustive: every configuration), composed "
      "per microbatch, solved by perseus into the iteration frontier; every plan names each partition's schedule.\n"
      "Example: perseus kareus search --model llama3.2-3b --gpu a100-sxm --tp 8 --pp 2 --microbatch-size 8 "
      "--seq-len 4096 --microbatches 8 --out kareus/");
  add_workload_flags(search, search_args.workload);
  search->add_flag("--exhaustive", search_args.exhaustive, "Measure every configuration instead of searching");
  search->add_option("--seed", search_args.seed, "Seed of the MBO's draws")->capture_default_str();
  search->add_option("--evaluator", search_args.evaluator,
                     "A command that measures configurations (JSON lines, docs/kareus.md); default: the emulated GPU");
  search->add_option("--timeout", search_args.timeout, "Seconds one answer of --evaluator may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  search->add_option("--samples", search_args.samples,
                     "Append every sample to this CSV as it is measured; samples in it are reused (resume)");
  search->add_option("--out", search_args.out, "Output directory")->required();
  search->add_flag("--force", search_args.force, "Replace an existing --out directory");
  search->add_flag("--json", search_args.json, "Print the summary as JSON");
  search->add_flag("-q,--quiet", search_args.quiet, "No progress messages");
  search->callback([] { run_search(search_args); });

  static CalibrateArgs calibrate_args;
  CLI::App* calibrate = kareus->add_subcommand(
      "calibrate", "The emulated GPU against a measured knob space (data/kareus): errors, fitted constants");
  calibrate->footer("Example: perseus kareus calibrate --measured data/kareus");
  calibrate->add_option("--measured", calibrate_args.measured,
                        "Directory of the Kareus authors' CSVs (NAME-<N>mhz.csv, NAME-default-clock.csv)")
      ->capture_default_str();
  calibrate->add_option("--gpu", calibrate_args.gpu, "The GPU they were measured on")->capture_default_str();
  calibrate->add_option("--block-size", calibrate_args.block_size, "The collective's thread-block size to use")
      ->capture_default_str();
  calibrate->add_flag("--json", calibrate_args.json, "Print as JSON");
  calibrate->callback([] { run_calibrate(calibrate_args); });

  static CompareArgs compare_args;
  CLI::App* compare = kareus->add_subcommand(
      "compare", "Megatron-LM, Megatron-LM + Perseus, Nanobatching + Perseus and Kareus on one emulated GPU");
  compare->footer(
      "Every partition searched exhaustively, composed per microbatch (Algorithm 2) and solved into the iteration "
      "frontier of each method. --out writes each method's profile (a knob column `schedule`) for perseus optimize.\n"
      "Example: perseus kareus compare --model llama3.2-3b --tp 8 --pp 2 --microbatch-size 8 --seq-len 4096 "
      "--microbatches 8");
  add_workload_flags(compare, compare_args.workload);
  compare->add_option("--out", compare_args.out, "Directory for comparison.json and each method's profile CSV");
  compare->add_flag("--force", compare_args.force, "Replace an existing --out directory");
  compare->add_flag("--json", compare_args.json, "Print the comparison as JSON");
  compare->add_flag("-q,--quiet", compare_args.quiet, "No progress messages");
  compare->callback([] { run_compare(compare_args); });
}

}  // namespace perseus::cli
