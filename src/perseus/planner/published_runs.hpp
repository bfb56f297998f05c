// Published end-to-end training runs and the planner's time model fitted to them.
//
// The bundled profiles give the model's clock and power behaviour, but they time forward and
// backward computations only, at one shape (a 175B-class layer, tensor parallelism 8), and
// their software runs faster than the published large runs did at that same shape. Published
// runs give end-to-end throughput over model sizes from 1.7B to 1T parameters: what the planner
// must predict when it compares configurations. So the time part of a GPU's model at its top
// clock (matrix-multiply efficiency and its fall-off with per-GPU matrix width, bandwidth-bound
// passes, collective efficiency: PublishedRunsFit) is fitted to those runs, and the power part
// stays the profiles' fit.
//
// Source: Narayanan's dissertation, chapter 4 (Megatron-LM PTD-P, A100-80GB, sequence 2048,
// vocabulary 51,200), the same runs as Narayanan et al., SC'21: Table 4.1 (weak scaling, 1.7B
// to 1T), Table 4.2 (175B and 530B) and the 175B run of Section 4.5.1, all with the interleaved
// schedule and full recomputation. Throughput per GPU by
// the dissertation's equation 4.2, which counts recomputation's extra forward of the
// Transformer layers (not of the logits).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/parallel_config.hpp"

namespace perseus::planner {

struct PublishedRun {
  std::string source;       // "Table 4.1", ...
  double parameters_b = 0;  // as published, billions
  int layers = 0, hidden = 0, heads = 0;
  int tensor = 0;
  int pipeline = 0;         // 0: not published (the planner chooses)
  int gpus = 0;
  int global_batch = 0;
  int microbatch = 0;       // 0: not published (the planner chooses)
  double tflops_per_gpu = 0;
  int line = 0;             // in the file
};

// `source,parameters_b,layers,hidden,heads,tensor,pipeline,gpus,global_batch,microbatch,
// tflops_per_gpu`, lines starting with '#' are comments (data/published/ptdp.csv). InputError
// naming the file, line and column for a bad field, or for a file with no run.
std::vector<PublishedRun> read_published_runs(const std::filesystem::path& csv);

// The dissertation's equation 4.2: 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) FLOPs an iteration.
double published_iteration_flops(const PublishedRun& run, int seq_len = 2048, int vocab = 51200);

struct PublishedRunEstimate {
  ConfigEstimate estimate;      // the configuration the planner estimates the run as
  double tflops_per_gpu = 0.0;  // equation 4.2 over its iteration time
  double ratio = 0.0;           // estimate / published
};

// How the runs ran (the dissertation, Section 4.5.1: "the interleaved pipeline schedule with the
// scatter/gather optimization"), as the planner's sweep options: full recomputation, 1F1B or
// interleaved 1F1B with v in {2, 3, 4}, whichever is fastest (interleaving needs m a multiple of
// p, and an uneven split of the layers into p*v chunks makes it slower than 1F1B).
SweepOptions published_run_options(const PublishedRun& run, const EnergyModelParams& params);

// The planner's estimate of `run` at its published shape: t, and p and b where published,
// fixed; what is not published, the fastest (among configurations that fit, or all when none
// does: the run did). With `free_shape`, t, p and b are the planner's too: its own pick under the
// runs' schedules and recomputation. `params`: the GPU's model to estimate with.
PublishedRunEstimate estimate_published_run(const PublishedRun& run, const GpuSpec& gpu,
                                            const EnergyModelParams& params, bool free_shape = false);

struct PublishedFit {
  PublishedRunsFit fit;
  std::vector<double> ratios;            // estimate / published with the fit, per run
  std::vector<double> held_out_ratios;   // each run fitted without it (empty unless asked)
  double rms_log_error = 0.0;            // sqrt(mean(log(ratio)^2))
  int evaluations = 0;
};

// Fits PublishedRunsFit to `runs` on `gpu` (its profile fit gives the power part) by
// Levenberg-Marquardt (Eigen) on log(estimate / published), from `start`. `leave_one_out`
// also refits once per run without it and predicts it (the refits on every core). Each
// evaluation estimates every run (a few configurations each): O(runs * iterations).
// InputError for no runs.
PublishedFit fit_published_runs(const std::vector<PublishedRun>& runs, const GpuSpec& gpu,
                                const PublishedRunsFit& start, bool leave_one_out = false);

}  // namespace perseus::planner
