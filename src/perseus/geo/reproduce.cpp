#include "perseus/geo/reproduce.hpp"

#include <fmt/format.h>

namespace perseus::geo {

std::vector<TestbedPoint> testbed_sweep(int baseline_connections) {
  constexpr int kAtlasConnections = 64;  // enough to reach the 5 Gbps cap at every latency
  std::vector<TestbedPoint> out;
  for (const char* model : {"gpt-a", "gpt-b"})
    for (int M : {4, 16})
      for (double latency : {10.0, 20.0, 30.0, 40.0})
        for (Scheduler scheduler : {Scheduler::kGPipe, Scheduler::k1F1B, Scheduler::kVaruna, Scheduler::kAtlas}) {
          NetworkSpec net;
          net.dcs = parse_dcs("4,4,4");
          net.wan_latency_ms = latency;
          net.connections = scheduler == Scheduler::kAtlas ? kAtlasConnections : baseline_connections;
          WorkloadSpec spec;
          spec.model = model, spec.stages = 4, spec.microbatches = M;
          const Workload w = make_workload(spec, net);
          const Placement pl = place_stage_major(net, 4, 3, scheduler == Scheduler::kAtlas ? 3 : 1);
          const GeoEmulation e = emulate(w, net, pl, {scheduler, LinkSharing::kQueue, {}});
          out.push_back({model, M, latency, scheduler, net.connections, e.pipeline_time_s, e.iteration_time_s,
                         e.utilization()});
        }
  return out;
}

NetworkSpec scale_network(const std::vector<int>& gpus_per_dc) {
  NetworkSpec net;
  for (std::size_t i = 0; i < gpus_per_dc.size(); ++i) net.dcs.push_back({fmt::format("dc{}", i + 1), gpus_per_dc[i]});
  net.connections = 64;  // both schedulers at the 5 Gbps cap (the paper gives Varuna multiple connections too)
  net.wan_latency_ms = 20.0;
  return net;
}

Workload scale_workload(int ratio, const NetworkSpec& network) {
  WorkloadSpec spec;
  spec.model = "gpt-a", spec.layers = 60, spec.stages = 60, spec.microbatches = 60;
  spec.forward_ms = 50.0, spec.comm_ratio = ratio;
  return make_workload(spec, network);
}

std::vector<ScalePoint> scale_sweep(const std::function<void(int, int)>& progress) {
  const std::vector<std::vector<int>> sets = {{600, 600, 600, 600, 600}, {600, 500, 400, 300, 200}};
  std::vector<ScalePoint> out;
  const int total = 2 * 2 * 5;
  for (int set = 0; set < 2; ++set)
    for (int ratio : {2, 3})
      for (int n = 1; n <= 5; ++n) {
        const NetworkSpec net = scale_network({sets[set].begin(), sets[set].begin() + n});
        const Workload w = scale_workload(ratio, net);
        ScalePoint p;
        p.dc_set = set + 1, p.dcs = n, p.ratio = ratio, p.gpus = net.total_gpus();
        const Placement varuna = place_stage_major(net, 60, 0, 1);
        p.varuna_throughput = emulate(w, net, varuna, {Scheduler::kVaruna, LinkSharing::kQueue, {}}).throughput(60);
        DcSelectionOptions options;
        options.cell_size = ratio;
        const DcSelection s = select_dcs(w, net, options);
        if (s.best >= 0) {
          const DcChoice& best = s.choices[static_cast<std::size_t>(s.best)];
          p.atlas_throughput = best.throughput, p.atlas_cells = best.cells, p.atlas_gpus = best.gpus_used;
        }
        out.push_back(p);
        if (progress) progress(static_cast<int>(out.size()), total);
      }
  return out;
}

std::vector<BalancePoint> balance_sweep() {
  std::vector<BalancePoint> out;
  double alone = 0.0;
  for (int step = 0; step <= 10; ++step) {
    BalancePoint p;
    p.fraction = step / 10.0;
    p.second_dc_gpus = 60 * step;
    std::vector<int> gpus{600};
    if (p.second_dc_gpus > 0) gpus.push_back(p.second_dc_gpus);
    const NetworkSpec net = scale_network(gpus);
    const Workload w = scale_workload(2, net);
    DcSelectionOptions options;
    options.cell_size = 2;
    options.keep_order = true;
    const DcSelection s = select_dcs(w, net, options);
    const DcChoice& best = s.choices[static_cast<std::size_t>(s.best)];
    p.stages_per_dc = best.stages_per_dc;
    p.gpus_used = best.gpus_used;
    p.throughput = best.throughput;
    if (step == 0) alone = p.throughput;
    p.relative = p.throughput / alone;
    out.push_back(p);
  }
  return out;
}

TestbedTraining testbed_training(int microbatches) {
  TestbedTraining t;
  t.network.dcs = parse_dcs("4,4,4");
  t.network.connections = 64;
  WorkloadSpec spec;
  spec.microbatches = microbatches;
  t.workload = make_workload(spec, t.network);
  t.training = emulate(t.workload, t.network, place_stage_major(t.network, 4, 3, 3), {Scheduler::kAtlas, LinkSharing::kQueue, {}});
  return t;
}

std::vector<BubbleTeaPoint> bubbletea_sweep(const std::vector<double>& rates) {
  const TestbedTraining t = testbed_training();
  std::vector<BubbleTeaPoint> out;
  for (double rate : rates) {
    BubbleTeaSpec spec;
    spec.arrival_rate = rate;
    const BubbleTeaResult r = fill_bubbles(t.training, t.network, spec);
    const GeoEmulation held = replay(t.workload, t.network, t.training, r.held);
    out.push_back({rate, r.training_utilization, r.utilization, r.served, r.declined, r.median_added_s,
                   held.iteration_time_s == t.training.iteration_time_s});
  }
  return out;
}

FillOrSlowResult testbed_fill_or_slow(double rate, BubbleObjective objective) {
  const TestbedTraining t = testbed_training();
  FillOrSlowSpec spec;
  spec.prefills.arrival_rate = rate;
  spec.objective = objective;
  return fill_or_slow(t.workload, t.network, t.training, spec);
}

GeoEvaluation evaluate_geo(const std::function<void(const std::string&)>& progress) {
  const auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  GeoEvaluation out;
  say("Figs. 8 and 9: the 12-GPU testbed");
  out.fig8 = testbed_sweep(1);
  out.fig9 = testbed_sweep(64);
  say("Fig. 10: up to 3,000 GPUs in 5 DCs");
  out.fig10 = scale_sweep();
  say("Fig. 11: two DCs");
  out.fig11 = balance_sweep();
  say("BubbleTea and fill or slow");
  out.bubbletea = bubbletea_sweep({10.0, 20.0, 40.0, 80.0});
  out.fill_or_slow = testbed_fill_or_slow(20.0, BubbleObjective::kEnergyPerFlop);
  return out;
}

}  // namespace perseus::geo
