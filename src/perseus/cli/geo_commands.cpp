// `perseus geo simulate | select-dcs | bubbletea`: geo-distributed training (docs/geo.md). The
// work is in the geo module; here flags are parsed and results printed.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/geo/bubbletea.hpp"
#include "perseus/geo/dc_selection.hpp"
#include "perseus/geo/fill_or_slow.hpp"
#include "perseus/geo/geo_output.hpp"
#include "perseus/geo/pipeline_emulator.hpp"
#include "perseus/geo/reproduce.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/report/geo_figures.hpp"

namespace perseus::cli {
namespace {

using namespace perseus::geo;

struct GeoArgs {
  std::string dcs = "4,4,4";
  double latency_ms = 20.0;
  int connections = 1;
  double intra_dc_gbps = 100.0;
  double pair_cap_gbps = 5.0;
  std::string model = "gpt-a";
  std::string gpu = "a100-sxm";
  int stages = 4;
  int microbatches = 4;
  int microbatch_size = 1;
  int layers = 0;
  int pipelines = 0;
  int cell_size = 0;
  std::string scheduler = "atlas";
  std::string sharing = "queue";
  bool no_recompute = false;
  double forward_ms = 0.0;
  double comm_ratio = 0.0;
  double memory_gb = 0.0;
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

void add_network_flags(CLI::App* cmd, GeoArgs& a) {
  cmd->add_option("--dcs", a.dcs, "GPUs in each datacenter, comma-separated (e.g. 600,500,400)")->capture_default_str();
  cmd->add_option("--latency-ms", a.latency_ms, "One-way WAN latency between DCs, ms")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--connections", a.connections, "TCP connections per node pair across the WAN (Atlas: many)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--intra-dc-gbps", a.intra_dc_gbps, "Bandwidth between two nodes of a DC, Gbps")->capture_default_str()->check(kPositive);
  cmd->add_option("--pair-cap-gbps", a.pair_cap_gbps, "Most a node pair gets across the WAN, Gbps")->capture_default_str()->check(kPositive);
}

void add_workload_flags(CLI::App* cmd, GeoArgs& a) {
  cmd->add_option("--model", a.model, "A Transformer of the catalogue: gpt-a, gpt-b (Atlas's), gpt3-*, llama3-*, ...")->capture_default_str();
  cmd->add_option("--gpu", a.gpu, "A GPU of the catalogue")->capture_default_str();
  cmd->add_option("--stages", a.stages, "Pipeline stages (partitions)")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--microbatches", a.microbatches, "Microbatches per pipeline per iteration")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--microbatch-size", a.microbatch_size, "Sequences per microbatch")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--layers", a.layers, "Transformer layers (0: the model's)")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_flag("--no-recompute", a.no_recompute, "Varuna and Atlas keep activations instead of recomputing them");
  cmd->add_option("--forward-ms", a.forward_ms, "Every stage's forward takes this long (0: the model's)")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--comm-ratio", a.comm_ratio, "A WAN transfer takes this many forwards (0: from the sizes)")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--memory-gb", a.memory_gb, "GPU memory, GiB (0: the GPU's)")->capture_default_str()->check(kNonNegative);
}

void add_cluster_flags(CLI::App* cmd, GeoArgs& a) {
  add_network_flags(cmd, a);
  add_workload_flags(cmd, a);
  cmd->add_option("--pipelines", a.pipelines, "Data-parallel pipelines (0: as many as the GPUs hold)")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--cell-size", a.cell_size,
                  "Pipelines per DP-cell sharing the WAN in time (Atlas; 0: the communication-to-compute ratio, at most the pipelines)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--link-sharing", a.sharing, "Transfers on one link: queue (one at a time, as PyTorch) or split (share the bandwidth)")
      ->capture_default_str();
}

NetworkSpec network_of(const GeoArgs& a) {
  NetworkSpec net;
  net.dcs = parse_dcs(a.dcs);
  net.wan_latency_ms = a.latency_ms;
  net.connections = a.connections;
  net.intra_dc_gbps = a.intra_dc_gbps;
  net.pair_cap_gbps = a.pair_cap_gbps;
  validate(net);
  return net;
}

Workload workload_of(const GeoArgs& a, const NetworkSpec& net) {
  WorkloadSpec spec;
  spec.model = a.model, spec.gpu = a.gpu, spec.stages = a.stages, spec.microbatches = a.microbatches;
  spec.microbatch_size = a.microbatch_size, spec.layers = a.layers, spec.recompute = !a.no_recompute;
  spec.forward_ms = a.forward_ms, spec.comm_ratio = a.comm_ratio, spec.memory_gb = a.memory_gb;
  return make_workload(spec, net);
}

// C = ceil(WAN transfer / forward): the fewest pipelines whose turns cover a transfer (Atlas §4.4).
int default_cell_size(const Workload& w, const NetworkSpec& net, int pipelines) {
  const double ratio = w.activation_bytes / net.wan_pair_bandwidth() / w.stages.front().forward_s;
  return std::clamp(static_cast<int>(std::ceil(ratio - 1e-9)), 1, std::max(1, pipelines));
}

struct Cluster {
  NetworkSpec network;
  Workload workload;
  Placement placement;
};

Cluster cluster_of(const GeoArgs& a, Scheduler scheduler) {
  Cluster c{network_of(a), {}, {}};
  c.workload = workload_of(a, c.network);
  c.placement = place_stage_major(c.network, a.stages, a.pipelines, 1);
  if (scheduler == Scheduler::kAtlas)
    c.placement.cell_size = a.cell_size > 0 ? std::min(a.cell_size, c.placement.pipelines)
                                            : default_cell_size(c.workload, c.network, c.placement.pipelines);
  return c;
}

void print_emulation(const GeoEmulation& e, const Cluster& c) {
  fmt::print("{}: {} GPUs in {} DCs, {} pipelines x {} stages{}, {} microbatches\n", to_string(e.scheduler), e.num_gpus(),
             c.network.dcs.size(), e.placement.pipelines, e.placement.stages,
             e.scheduler == Scheduler::kAtlas ? fmt::format(" (DP-cells of {})", e.placement.cell_size) : "",
             c.workload.spec.microbatches);
  fmt::print("  WAN: {:.0f} ms, {} connection(s) per node pair: {:.3f} Gbps\n", c.network.wan_latency_ms,
             c.network.connections, c.network.wan_pair_bandwidth() * 8e-9);
  fmt::print("  pipeline time {:.3f} s, iteration {:.3f} s (all-reduce {:.3f} s), GPU utilisation {:.1f}%, {:.2f} microbatches/s\n",
             e.pipeline_time_s, e.iteration_time_s, e.iteration_time_s - e.pipeline_time_s, 100.0 * e.utilization(),
             e.throughput(c.workload.spec.microbatches));
  for (const std::string& w : e.warnings) fmt::print(stderr, "perseus: warning: {}\n", w);
}

void run_simulate(const GeoArgs& a) {
  std::vector<Scheduler> schedulers;
  if (a.scheduler == "all")
    schedulers = {Scheduler::kGPipe, Scheduler::k1F1B, Scheduler::kVaruna, Scheduler::kAtlas};
  else
    schedulers = {parse_scheduler(a.scheduler)};
  const LinkSharing sharing = parse_link_sharing(a.sharing);
  if (!a.out.empty() && schedulers.size() > 1) throw InputError("--out needs one --scheduler, not all");
  nlohmann::json all = nlohmann::json::array();
  for (Scheduler scheduler : schedulers) {
    const Cluster c = cluster_of(a, scheduler);
    if (!a.quiet && c.placement.num_gpus() >= 1000)
      fmt::print(stderr, "perseus: emulating {} GPUs ({})\n", c.placement.num_gpus(), to_string(scheduler));
    const GeoEmulation e = emulate(c.workload, c.network, c.placement, {scheduler, sharing, {}});
    if (a.json)
      all.push_back(nlohmann::json::parse(emulation_json(e, c.workload, c.network, false)));
    else
      print_emulation(e, c);
    if (!a.out.empty()) {
      write_directory_atomically(a.out, a.force,
                                 {{"emulation.json", emulation_json(e, c.workload, c.network, true)},
                                  {"timeline.csv", timeline_csv(e, nullptr)},
                                  {"trace.json", chrome_trace(e, nullptr)}});
      if (!a.json) fmt::print("wrote {}/emulation.json, timeline.csv, trace.json (ui.perfetto.dev)\n", a.out);
    }
  }
  if (a.json) std::cout << (all.size() == 1 ? all[0] : all).dump(1) << "\n";
}

struct SelectArgs {
  GeoArgs cluster;
  int cell_size = 2;
  int max_cells = 0;
  bool keep_order = false;
  bool whole_cells = false;
};

void run_select(const SelectArgs& a) {
  const NetworkSpec net = network_of(a.cluster);
  const Workload w = workload_of(a.cluster, net);
  DcSelectionOptions options;
  options.cell_size = a.cell_size, options.max_cells = a.max_cells, options.keep_order = a.keep_order;
  options.partial_cells = !a.whole_cells;
  options.sharing = parse_link_sharing(a.cluster.sharing);
  const bool terminal = isatty(2) && !a.cluster.quiet;
  if (terminal)
    options.progress = [](int done, int total) {
      fmt::print(stderr, "\rperseus: {} of {} DP-cell counts", done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  const DcSelection s = select_dcs(w, net, options);
  if (a.cluster.json) {
    std::cout << dc_selection_json(s, net);
    return;
  }
  fmt::print("Atlas's DC selection: {} stages, DP-cells of {}, {} microbatches ({} emulations)\n", w.num_stages(),
             a.cell_size, w.spec.microbatches, s.distinct_emulations);
  fmt::print("{:>9} {:>6} {:>24} {:>10} {:>10} {:>10} {:>10} {:>14}\n", "pipelines", "cells", "stages per DC", "GPUs",
             "PP s", "AR s", "total s", "microbatch/s");
  for (const DcChoice& c : s.choices) {
    if (!c.feasible) {
      fmt::print("{:>9} {:>6} {:>24}\n", c.pipelines, c.cells, "does not fit");
      continue;
    }
    fmt::print("{:>9} {:>6} {:>24} {:>10} {:>10.3f} {:>10.3f} {:>10.3f} {:>14.2f}{}\n", c.pipelines, c.cells,
               fmt::format("{}", fmt::join(c.stages_per_dc, ",")),
               c.gpus_used, c.pipeline_time_s, c.allreduce_s, c.total_s, c.throughput,
               &c == &s.choices[static_cast<std::size_t>(std::max(0, s.best))] ? "  <- best" : "");
  }
  if (s.best < 0) {
    fmt::print("no number of DP-cells places every stage\n");
    return;
  }
  const DcChoice& best = s.choices[static_cast<std::size_t>(s.best)];
  for (std::size_t d = 0; d < net.dcs.size(); ++d)
    if (best.gpus_used_per_dc[d] < net.dcs[d].gpus)
      fmt::print("  {}: {} of {} GPUs left unused\n", net.dcs[d].name, net.dcs[d].gpus - best.gpus_used_per_dc[d],
                 net.dcs[d].gpus);
}

struct BubbleArgs {
  GeoArgs cluster;
  BubbleTeaSpec spec;
  std::string tokens = "1024:8192";
  double guard_ms = 5.0, max_wait_ms = 1000.0, prefill_ms = 300.0;
};

BubbleTeaSpec bubbletea_spec(const BubbleArgs& a) {
  BubbleTeaSpec spec = a.spec;
  const auto colon = a.tokens.find(':');
  try {
    spec.min_tokens = std::stoi(a.tokens.substr(0, colon));
    spec.max_tokens = colon == std::string::npos ? spec.min_tokens : std::stoi(a.tokens.substr(colon + 1));
  } catch (const std::exception&) {
    throw InputError(fmt::format("--tokens '{}': expected MIN:MAX or N", a.tokens));
  }
  spec.guard_s = a.guard_ms * 1e-3, spec.max_wait_s = a.max_wait_ms * 1e-3, spec.reference_s = a.prefill_ms * 1e-3;
  return spec;
}

void add_bubbletea_flags(CLI::App* cmd, BubbleArgs& a) {
  add_cluster_flags(cmd, a.cluster);
  cmd->add_option("--scheduler", a.cluster.scheduler, "The training's scheduler")->capture_default_str();
  cmd->add_option("--rate", a.spec.arrival_rate, "Prefill requests per second (Poisson)")->capture_default_str()->check(kPositive);
  cmd->add_option("--tokens", a.tokens, "Prompt tokens, uniform in MIN:MAX")->capture_default_str();
  cmd->add_option("--inference-model", a.spec.inference_model, "The model served")->capture_default_str();
  cmd->add_option("--prefill-ms", a.prefill_ms, "A prefill of --prefill-tokens on one GPU, whole model, ms (A100, Llama 3 8B: 300)")->capture_default_str()->check(kPositive);
  cmd->add_option("--prefill-tokens", a.spec.reference_tokens, "Tokens of that reference prefill")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--inference-stages", a.spec.inference_stages, "GPUs per inference pipeline (0: the DP-cells)")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--guard-ms", a.guard_ms, "Left free before the next training computation, ms")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--max-wait-ms", a.max_wait_ms, "Declined unless it can start within this, ms")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--iterations", a.spec.iterations, "Training iterations the requests arrive over")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--seed", a.spec.seed, "Seed of the request stream")->capture_default_str();
  cmd->add_flag("--force", a.cluster.force, "Replace --out if perseus wrote it");
  cmd->add_flag("--json", a.cluster.json, "Print JSON");
}

void run_bubbletea(const BubbleArgs& a) {
  const BubbleTeaSpec spec = bubbletea_spec(a);
  const Scheduler scheduler = parse_scheduler(a.cluster.scheduler);
  const Cluster c = cluster_of(a.cluster, scheduler);
  const GeoEmulation training = emulate(c.workload, c.network, c.placement, {scheduler, parse_link_sharing(a.cluster.sharing), {}});
  const BubbleTeaResult r = fill_bubbles(training, c.network, spec);
  // BubbleTea must leave training alone: replay it with the GPUs held by the prefills.
  const GeoEmulation with_prefills = replay(c.workload, c.network, training, r.held);
  const double delay = with_prefills.iteration_time_s - training.iteration_time_s;
  if (a.cluster.json) {
    auto out = nlohmann::json::parse(bubbletea_json(r, training, false));
    out["iteration_time_with_prefills_s"] = with_prefills.iteration_time_s;
    std::cout << out.dump(1) << "\n";
  } else {
    print_emulation(training, c);
    fmt::print("BubbleTea: {} prefill requests ({} per s, {}..{} tokens) over {} iterations\n", r.requests.size(),
               spec.arrival_rate, spec.min_tokens, spec.max_tokens, spec.iterations);
    fmt::print("  served {}, declined {}; inference pipelines of {} GPUs ({} of them), {:.2f} GiB per GPU\n", r.served,
               r.declined, r.inference_stages, r.inference_pipelines, r.inference_memory_bytes / (1024.0 * 1024 * 1024));
    fmt::print("  GPU utilisation {:.1f}% with training alone, {:.1f}% with prefills\n", 100 * r.training_utilization,
               100 * r.utilization);
    fmt::print("  TTFT median {:.0f} ms, p99 {:.0f} ms; added over a dedicated GPU (wait, hops, KV hand-off) median {:.0f} ms\n",
               1e3 * r.median_ttft_s, 1e3 * r.p99_ttft_s, 1e3 * r.median_added_s);
    fmt::print("  training iteration {:.6f} s with prefills, {:.6f} s without ({})\n", with_prefills.iteration_time_s,
               training.iteration_time_s, delay == 0.0 ? "unchanged" : fmt::format("{:+.3g} s", delay));
  }
  if (!a.cluster.out.empty())
    write_directory_atomically(a.cluster.out, a.cluster.force,
                               {{"bubbletea.json", bubbletea_json(r, training, true)},
                                {"emulation.json", emulation_json(training, c.workload, c.network, true)},
                                {"timeline.csv", timeline_csv(training, &r)},
                                {"trace.json", chrome_trace(training, &r, 1)}});
}


struct FillOrSlowArgs {
  BubbleArgs bubble;
  std::string objective = "energy-per-flop";
  double price_per_kwh = 0.10, value_per_mtokens = 0.05;
};

void run_fill_or_slow(const FillOrSlowArgs& a) {
  FillOrSlowSpec spec;
  spec.prefills = bubbletea_spec(a.bubble);
  spec.objective = parse_bubble_objective(a.objective);
  spec.price_per_kwh = a.price_per_kwh, spec.value_per_mtokens = a.value_per_mtokens;
  const GeoArgs& g = a.bubble.cluster;
  const Scheduler scheduler = parse_scheduler(g.scheduler);
  const Cluster c = cluster_of(g, scheduler);
  const GeoEmulation training = emulate(c.workload, c.network, c.placement, {scheduler, parse_link_sharing(g.sharing), {}});
  const FillOrSlowResult r = fill_or_slow(c.workload, c.network, training, spec);
  const std::string json = fill_or_slow_json(r, false);
  if (g.json) {
    std::cout << json << "\n";
  } else {
    print_emulation(training, c);
    fmt::print("Per bubble: fill it with prefills (BubbleTea) or slow the computation before it (Perseus); mixed picks by {}\n",
               spec.objective == BubbleObjective::kPrice
                   ? fmt::format("price (${}/kWh, ${} per million prefill tokens)", spec.price_per_kwh, spec.value_per_mtokens)
                   : std::string("energy per useful FLOP"));
    fmt::print("  {:<6} {:>9} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>11} {:>9} {:>8}\n", "policy", "filled",
               "slowed", "util", "energy kJ", "train kJ", "prefill", "idle kJ", "J/TFLOP", "tokens/s", "$/hour", "same T");
    for (const PolicyOutcome& o : r.outcomes)
      fmt::print("  {:<6} {:>9} {:>8} {:>7.1f}% {:>10.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.2f} {:>11.0f} {:>9.2f} {:>8}\n", o.policy,
                 o.bubbles_filled, o.bubbles_slowed, 100 * o.utilization, o.total_j() / 1e3, o.computation_j / 1e3,
                 o.prefill_j / 1e3, o.idle_j / 1e3, o.joules_per_tflop(), o.prefill_tokens_per_s, o.net_value_per_hour(spec),
                 o.training_unchanged ? "yes" : "NO");
    fmt::print("  (energy per iteration of {:.4f} s over {} bubbles; prefills at {:.0f} W, idle GPUs at {:.0f} W)\n",
               training.iteration_time_s, r.bubbles.size(), r.prefill_power_w, r.blocking_power_w);
  }
  if (!g.out.empty())
    write_directory_atomically(g.out, g.force,
                               {{"fill_or_slow.json", fill_or_slow_json(r, true) + "\n"},
                                {"timeline.csv", timeline_csv(r.mixed_training, &r.mixed_prefills)},
                                {"trace.json", chrome_trace(r.mixed_training, &r.mixed_prefills, 1)}});
}

struct ReproduceArgs {
  std::string out;
  bool force = false;
  bool json = false;
  bool quiet = false;
};

// Atlas's Figs. 8-11, BubbleTea and fill or slow on the emulator, as tables (docs/geo.md quotes
// them), and with --out as figures.
void run_reproduce(const ReproduceArgs& a) {
  const bool terminal = isatty(2) && !a.quiet;
  const GeoEvaluation e = evaluate_geo([&](const std::string& what) {
    if (terminal) fmt::print(stderr, "perseus: {}\n", what);
  });
  const std::string json = reproduce_json(e);
  if (!a.out.empty()) {
    std::vector<std::pair<std::string, std::string>> files = {{"reproduce.json", json + "\n"}};
    for (auto& [name, svg] : report::geo_figures(e)) files.emplace_back(name + ".svg", std::move(svg));
    write_directory_atomically(a.out, a.force, files);
  }
  if (a.json) {
    std::cout << json << "\n";
    return;
  }
  for (const auto* points : {&e.fig8, &e.fig9}) {
    const bool eight = points == &e.fig8;
    fmt::print("{}: 12 GPUs in 3 DCs, pipeline time (s) with the baselines at {} TCP connection(s), Atlas at the cap; Atlas's gain\n",
               eight ? "Fig. 8" : "Fig. 9", eight ? 1 : 64);
    for (std::size_t i = 0; i + 3 < points->size(); i += 4) {
      const auto& p = *points;
      const TestbedPoint& atlas = p[i + 3];
      fmt::print("  {} M={:<2} {:>2.0f} ms: gpipe {:7.3f} 1f1b {:7.3f} varuna {:7.3f} atlas {:6.3f}   gain {:5.2f}x {:5.2f}x {:5.2f}x\n",
                 atlas.model, atlas.microbatches, atlas.latency_ms, p[i].pipeline_time_s, p[i + 1].pipeline_time_s,
                 p[i + 2].pipeline_time_s, atlas.pipeline_time_s, p[i].pipeline_time_s / atlas.pipeline_time_s,
                 p[i + 1].pipeline_time_s / atlas.pipeline_time_s, p[i + 2].pipeline_time_s / atlas.pipeline_time_s);
    }
  }
  fmt::print("Fig. 10: throughput (microbatches/s), Varuna and Atlas (Algorithm 1)\n");
  for (const ScalePoint& p : e.fig10)
    fmt::print("  DC-set-{} C={} {} DC(s) {:>4} GPUs: varuna {:7.2f} atlas {:7.2f} ({} GPUs) {:+.1f}%\n", p.dc_set, p.ratio,
               p.dcs, p.gpus, p.varuna_throughput, p.atlas_throughput, p.atlas_gpus,
               100.0 * (p.atlas_throughput / p.varuna_throughput - 1.0));
  fmt::print("Fig. 11: two DCs, 600 + 600 F GPUs, Atlas with Algorithm 1, throughput over one DC\n");
  for (const BalancePoint& p : e.fig11)
    fmt::print("  F={:.1f}: {} GPUs used, stages {}, {:.3f}x\n", p.fraction, p.gpus_used, fmt::join(p.stages_per_dc, "+"),
               p.relative);
  fmt::print("BubbleTea on the testbed (Atlas, GPT-A, M=5): GPU utilisation\n");
  for (const BubbleTeaPoint& p : e.bubbletea)
    fmt::print("  {:>3.0f} requests/s: {:.1f}% -> {:.1f}%, served {}, declined {}, training {}\n", p.rate,
               100 * p.training_utilization, 100 * p.utilization, p.served, p.declined,
               p.training_unchanged ? "unchanged" : "CHANGED");
  fmt::print("Fill or slow at {:g} requests/s (energy per useful FLOP):\n", e.fill_or_slow.spec.prefills.arrival_rate);
  for (const PolicyOutcome& o : e.fill_or_slow.outcomes)
    fmt::print("  {:<6} {:7.3f} kJ/iteration, {:5.2f} J/TFLOP, {:6.0f} prefill tokens/s\n", o.policy, o.total_j() / 1e3,
               o.joules_per_tflop(), o.prefill_tokens_per_s);
  if (!a.out.empty()) fmt::print("Wrote {}\n", a.out);
}

}  // namespace

void add_geo_commands(CLI::App& app) {
  CLI::App* geo = app.add_subcommand("geo", "Geo-distributed training: Atlas's WAN-aware pipelines and DC selection, BubbleTea's prefills");
  geo->require_subcommand(1);

  static GeoArgs sim;
  CLI::App* simulate = geo->add_subcommand("simulate", "Emulate one iteration of pipelines across DCs under a scheduler");
  simulate->footer("Example: perseus geo simulate --dcs 4,4,4 --latency-ms 20 --model gpt-a --microbatches 4 --scheduler all --connections 64");
  add_cluster_flags(simulate, sim);
  simulate->add_option("--scheduler", sim.scheduler, "atlas, varuna, gpipe, 1f1b, or all (a table)")->capture_default_str();
  simulate->add_option("--out", sim.out, "Write emulation.json, timeline.csv and trace.json (Perfetto) here");
  simulate->add_flag("--force", sim.force, "Replace --out if perseus wrote it");
  simulate->add_flag("--json", sim.json, "Print JSON");
  simulate->add_flag("-q,--quiet", sim.quiet, "No progress messages");
  simulate->callback([] { run_simulate(sim); });

  static SelectArgs sel;
  sel.cluster.dcs = "600,500,400,300,200";
  sel.cluster.stages = 60, sel.cluster.microbatches = 60, sel.cluster.layers = 60;
  sel.cluster.connections = 64;
  CLI::App* select = geo->add_subcommand("select-dcs", "Atlas's Algorithm 1: how many GPUs of which DCs, with the what-if table");
  select->footer("Example: perseus geo select-dcs --dcs 600,500,400,300,200 --cell-size 3 --comm-ratio 3 --forward-ms 50");
  add_network_flags(select, sel.cluster);
  add_workload_flags(select, sel.cluster);
  select->add_option("--cell-size", sel.cell_size, "C: pipelines per DP-cell")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  select->add_option("--max-cells", sel.max_cells, "D_max (0: total GPUs / (C stages))")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  select->add_flag("--keep-order", sel.keep_order, "Take the DCs in the order given, not by decreasing GPUs");
  select->add_flag("--whole-cells", sel.whole_cells, "Only multiples of C pipelines (the paper's rows), no smaller last cell");
  select->add_option("--link-sharing", sel.cluster.sharing, "queue or split")->capture_default_str();
  select->add_flag("--json", sel.cluster.json, "Print JSON");
  select->add_flag("-q,--quiet", sel.cluster.quiet, "No progress messages");
  select->callback([] { run_select(sel); });

  static BubbleArgs bub;
  bub.cluster.connections = 64;
  CLI::App* bubble = geo->add_subcommand("bubbletea", "Schedule inference prefills into the bubbles of an emulated training iteration");
  bubble->footer("Example: perseus geo bubbletea --dcs 4,4,4 --connections 64 --microbatches 5 --rate 40 --out bubbletea");
  add_bubbletea_flags(bubble, bub);
  bubble->add_option("--out", bub.cluster.out, "Write bubbletea.json, emulation.json, timeline.csv and trace.json here");
  bubble->callback([] { run_bubbletea(bub); });

  static FillOrSlowArgs fos;
  fos.bubble.cluster.connections = 64;
  CLI::App* fill = geo->add_subcommand(
      "fill-or-slow", "Per bubble: fill it with prefills (BubbleTea) or slow the work before it (Perseus): both pure policies and the mixed one");
  fill->footer(
      "Example: perseus geo fill-or-slow --dcs 4,4,4 --connections 64 --microbatches 5 --rate 20 --objective energy-per-flop\n"
      "         perseus geo fill-or-slow --rate 40 --objective price --price-per-kwh 0.12 --value-per-mtokens 0.05 --json");
  add_bubbletea_flags(fill, fos.bubble);
  fill->add_option("--objective", fos.objective, "What the mixed policy optimises: energy-per-flop or price")->capture_default_str();
  fill->add_option("--price-per-kwh", fos.price_per_kwh, "Price of GPU energy, $ per kWh (objective price)")->capture_default_str()->check(kNonNegative);
  fill->add_option("--value-per-mtokens", fos.value_per_mtokens, "Value of a million prefill tokens served, $ (objective price)")->capture_default_str()->check(kNonNegative);
  fill->add_option("--out", fos.bubble.cluster.out, "Write fill_or_slow.json, and the mixed policy's timeline.csv and trace.json here");
  fill->callback([] { run_fill_or_slow(fos); });

  static ReproduceArgs rep;
  CLI::App* reproduce = geo->add_subcommand("reproduce", "Atlas's Figs. 8-11, BubbleTea and fill or slow on the emulator, as tables and figures");
  reproduce->footer("Example: perseus geo reproduce --out atlas-figures   (reproduce.json and one SVG per figure)");
  reproduce->add_option("--out", rep.out, "Write reproduce.json and the figures (SVG) here");
  reproduce->add_flag("--force", rep.force, "Replace --out if perseus wrote it");
  reproduce->add_flag("--json", rep.json, "Print JSON");
  reproduce->add_flag("-q,--quiet", rep.quiet, "No progress messages");
  reproduce->callback([] { run_reproduce(rep); });
}

}  // namespace perseus::cli
