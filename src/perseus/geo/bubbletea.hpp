// BubbleTea (docs/geo.md, "Prefills in the bubbles"): inference prefills run in the bubbles of
// an emulated training timeline, never in the way of training.
//
// The training iteration repeats every T. Each GPU's bubbles (bubbles(), the all-reduce kept),
// less a guard time before the next training computation, are free slots. Prefill requests
// arrive as a Poisson stream with token counts drawn uniformly; an inference pipeline is K GPUs
// of one DC holding the same training rank in K DP-cells (the inference model's layers split
// evenly, so each holds 1/K of its weights). A prefill of n tokens takes
//   t(n) = t_ref * n / n_ref * layers_on_gpu / layers           (compute-bound, A100: Llama 3 8B, 8K tokens, 300 ms)
// on each GPU of the pipeline in turn, each part in one free slot, the activation (n * H * 2 bytes)
// handed on between GPUs and the KV cache (2 * layers * kv_width * n * 2 bytes) to a decode GPU
// over the DC's network at the end. A request goes to the pipeline where it finishes first; it
// is declined when no pipeline can start it within `max_wait_s`. TTFT is the wait plus every part,
// hop and the hand-off; what BubbleTea adds over a dedicated GPU is the wait, the hops and the
// hand-off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perseus/geo/pipeline_emulator.hpp"

namespace perseus::geo {

struct BubbleTeaSpec {
  std::string inference_model = "llama3-8b";
  double reference_s = 0.300;     // t_ref: a prefill of n_ref tokens on one GPU, whole model
  int reference_tokens = 8192;    // n_ref
  double arrival_rate = 20.0;     // requests per second (Poisson)
  int min_tokens = 1024, max_tokens = 8192;
  double guard_s = 0.005;         // free before the next training computation
  int inference_stages = 0;       // K; 0: the number of DP-cells
  double max_wait_s = 1.0;
  int iterations = 20;            // training iterations the stream runs over
  std::uint64_t seed = 1;
};

struct PrefillPart {
  int gpu = 0;
  double start_s = 0.0, end_s = 0.0;  // absolute, over the iterations
};

struct PrefillRequest {
  int id = 0;
  double arrival_s = 0.0;
  int tokens = 0;
  bool served = false;
  int pipeline = -1;                // the inference pipeline it ran on
  std::vector<PrefillPart> parts;
  double first_token_s = 0.0;       // KV cache at the decode GPU
  double ttft_s = 0.0;
  double added_s = 0.0;             // over a dedicated GPU: wait, hops and hand-off
};

struct BubbleTeaResult {
  BubbleTeaSpec spec;
  int inference_stages = 0;
  int inference_pipelines = 0;
  double horizon_s = 0.0;               // iterations x T
  double training_utilization = 0.0;    // training computation / GPU time
  double utilization = 0.0;             // training and prefills / GPU time
  double inference_memory_bytes = 0.0;  // per GPU: its share of the weights and of one 8K prefill's KV cache
  double inference_parameters = 0.0;    // the inference model's: a prefill does 2 of them FLOPs a token
  std::vector<PrefillRequest> requests;
  int served = 0, declined = 0;
  double median_ttft_s = 0.0, p99_ttft_s = 0.0, median_added_s = 0.0;
  double hop_overhead_s = 0.0;          // the hops of an n_ref-token prefill through K GPUs
  // Per GPU, the prefills folded into one iteration [0, T): what replay() holds the GPUs with.
  std::vector<std::vector<Interval>> held;
};

// Throws InputError for a bad spec (rate, tokens, guard, wait, iterations, K not positive, or K
// beyond the inference model's layers) and an unknown inference model.
BubbleTeaResult fill_bubbles(const GeoEmulation& training, const NetworkSpec& network,
                             const BubbleTeaSpec& spec);

}  // namespace perseus::geo
