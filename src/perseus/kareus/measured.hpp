// A measured Kareus knob space (data/kareus/: the Kareus authors' attention partition on two
// A100s, tensor parallel 2) as an evaluator, and the emulated GPU calibrated against it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "perseus/kareus/evaluator.hpp"

namespace perseus::kareus {

struct MeasuredConfig {
  Config config;
  int block_size = 0;     // the collective's thread-block size (512 or 1024)
  double time_s = 0.0;    // mean of the repeated measurements
  double energy_j = 0.0;  // one GPU's: the mean of both ranks' sum, halved
  double spread = 0.0;    // the repeats' largest relative distance from their mean (time or energy)
};

// Reads one CSV of the Kareus authors' format (overlap_start, overlap_end, comm_sm_number,
// comm_block_size, then k:time (s), k:total energy (J), ... for each repeat k). `clock_mhz` is
// the clock the file was measured at. InputError naming file, line and column otherwise.
std::vector<MeasuredConfig> read_measured_space(const std::filesystem::path& path, int clock_mhz);

// The partition those files measured: a Llama-style attention block (hidden 2048, 32 heads of
// 64, 8 KV heads as Llama 3.2 1B, fp16) of a nanobatch of 2 sequences of 4,096 tokens under TP 2:
// bias-dropout-add, layer norm, QKV, QKV post-processing, rotary embedding, attention, output
// projection (7 kernels, ungrouped, in the file's numbering), beside the previous nanobatch's
// all-reduce.
Partition measured_attention_partition();

// The measured values as an evaluator (one block size). Static energy is the GPU's static power
// (the catalogue's) times the time; dynamic the rest. InputError for a configuration not measured.
class TableEvaluator : public Evaluator {
 public:
  TableEvaluator(std::vector<MeasuredConfig> rows, int block_size, double static_power_w);
  Measurement evaluate(const Partition& partition, const Config& config) override;
  std::string name() const override { return "measured table"; }
  const std::vector<MeasuredConfig>& rows() const { return rows_; }

 private:
  std::vector<MeasuredConfig> rows_;
  double static_power_w_;
};

// How far the emulated GPU is from the measurements: over every measured configuration, the
// median and worst relative error of time and of energy (one GPU).
struct ModelError {
  double time_median = 0.0, time_worst = 0.0;
  double energy_median = 0.0, energy_worst = 0.0;
  // Spearman rank correlation of the model's times with the measured ones: whether it orders
  // the schedules as the GPU does (1: the same order), which the errors alone do not tell.
  double time_rank_correlation = 0.0;
  // What trusting the model costs: per clock, how much longer the schedule the model calls
  // fastest measured than the measured fastest (averaged over the clocks).
  double fastest_pick_loss = 0.0;
};
ModelError model_error(const EmulatedGpu& gpu, const Partition& partition, const std::vector<MeasuredConfig>& rows);

// The emulated GPU fitted to the measurements: a grid search over the collective's SMs to
// saturate the link, its HBM bytes per byte sent, the GEMM, attention and HBM efficiencies and the
// launch overhead, on the median relative time error plus the fastest pick's loss (so that the
// model also orders the best schedules as measured); then one factor on the dynamic power
// (compute and memory alike) on the median energy error; both twice, since the power changes
// how much the limit throttles. The GPU's other figures stay the catalogue's.
struct Calibration {
  GpuModelParams params;
  double dynamic_power_scale = 1.0;
  planner::GpuSpec gpu;  // the catalogue's, with the dynamic power scaled
  ModelError before, after;
  std::size_t candidates = 0;  // parameter sets tried
};
Calibration calibrate(const planner::GpuSpec& gpu, const Partition& partition, const std::vector<MeasuredConfig>& rows);

}  // namespace perseus::kareus
