// Atlas's evaluation (Figs. 8-11) rerun on the emulator, for `perseus geo reproduce`, the
// report and the tests (docs/geo.md, "The paper's figures"). Each function sets up the paper's
// configuration and returns one row per point.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "perseus/geo/dc_selection.hpp"
#include "perseus/geo/fill_or_slow.hpp"
#include "perseus/geo/pipeline_emulator.hpp"

namespace perseus::geo {

// Figs. 8 and 9: 12 GPUs in 3 DCs (4 each), 3 pipelines of 4 stages (Atlas: one DP-cell of 3),
// GPT-A or GPT-B, M = 4 or 16, WAN latency 10-40 ms. The baselines open `baseline_connections`
// TCP connections per node pair (Fig. 8: 1; Fig. 9: as many as Atlas); Atlas always reaches the
// pair cap.
struct TestbedPoint {
  std::string model;
  int microbatches = 0;
  double latency_ms = 0.0;
  Scheduler scheduler = Scheduler::kAtlas;
  int connections = 0;
  double pipeline_time_s = 0.0;
  double iteration_time_s = 0.0;
  double utilization = 0.0;
};
std::vector<TestbedPoint> testbed_sweep(int baseline_connections);

// Fig. 10: DC-set-1 (600 GPUs x 1..5 DCs) and DC-set-2 ([600, 500, 400, 300, 200], first 1..5),
// C = 2 and 3 (the WAN transfer takes C forwards, and Atlas's DP-cells have C pipelines), 60
// layers, stages and microbatches. Varuna runs as many pipelines as the GPUs hold, stage-major;
// Atlas what Algorithm 1 picks. Throughput in microbatches per second.
struct ScalePoint {
  int dc_set = 1;
  int dcs = 0;
  int ratio = 0;  // C
  int gpus = 0;
  double varuna_throughput = 0.0;
  double atlas_throughput = 0.0;
  int atlas_cells = 0;
  int atlas_gpus = 0;
};
std::vector<ScalePoint> scale_sweep(const std::function<void(int done, int total)>& progress = {});

// Fig. 11: two DCs, 600 GPUs and 600 F for F = 0, 0.1, ..., 1; C = 2, Atlas with Algorithm 1;
// throughput relative to the first DC alone.
struct BalancePoint {
  double fraction = 0.0;
  int second_dc_gpus = 0;
  std::vector<int> stages_per_dc;
  int gpus_used = 0;
  double throughput = 0.0;
  double relative = 0.0;
};
std::vector<BalancePoint> balance_sweep();

// The testbed's training that BubbleTea and fill or slow run on: Atlas, GPT-A, 12 GPUs in 3 DCs
// (one DP-cell of 3 pipelines of 4 stages), 64 connections, 20 ms, M microbatches.
struct TestbedTraining {
  NetworkSpec network;
  Workload workload;
  GeoEmulation training;
};
TestbedTraining testbed_training(int microbatches = 5);

// BubbleTea on the testbed (Atlas, GPT-A, M = 5, 64 connections, 20 ms) at each request rate.
struct BubbleTeaPoint {
  double rate = 0.0;
  double training_utilization = 0.0, utilization = 0.0;
  int served = 0, declined = 0;
  double median_added_s = 0.0;
  bool training_unchanged = false;
};
std::vector<BubbleTeaPoint> bubbletea_sweep(const std::vector<double>& rates);

// Fill or slow on the same testbed at one request rate.
FillOrSlowResult testbed_fill_or_slow(double rate, BubbleObjective objective);

// Everything `perseus geo reproduce` and the report's section show. `progress(what)` names each
// part as it starts.
struct GeoEvaluation {
  std::vector<TestbedPoint> fig8, fig9;  // baselines at 1 and 64 connections
  std::vector<ScalePoint> fig10;
  std::vector<BalancePoint> fig11;
  std::vector<BubbleTeaPoint> bubbletea;  // 10, 20, 40, 80 requests/s
  FillOrSlowResult fill_or_slow;         // 20 requests/s, energy per FLOP
};
GeoEvaluation evaluate_geo(const std::function<void(const std::string& what)>& progress = {});

// The workload and network both sweeps of Figs. 10 and 11 use: 60 layers of GPT-A, 60 stages
// and microbatches, 50 ms forwards, the WAN transfer `ratio` forwards at the 5 Gbps pair cap.
NetworkSpec scale_network(const std::vector<int>& gpus_per_dc);
Workload scale_workload(int ratio, const NetworkSpec& network);

}  // namespace perseus::geo
