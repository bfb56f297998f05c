// The models and GPUs the planner knows: architecture hyperparameters as published, GPU
// datasheet figures, and the energy model's parameters calibrated against measured profiles.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::planner {

enum class ModelFamily { kGpt, kBloom, kBert, kT5, kLlama, kWideResNet };
std::string_view to_string(ModelFamily family);

// A Transformer's shape. Decoder-only models (GPT, Bloom, Llama) use `layers`; BERT uses
// `layers` encoder layers; T5 has `layers` encoder and `decoder_layers` decoder layers.
struct TransformerShape {
  int layers = 0;
  int decoder_layers = 0;       // T5 only
  int hidden = 0;               // d_model
  int heads = 0;
  int kv_heads = 0;             // grouped-query attention (Llama 3); equals heads otherwise
  int head_dim = 0;             // heads * head_dim is the attention width (T5-3B: 4096 != d_model)
  int ffn_hidden = 0;
  bool gated_mlp = false;       // SwiGLU (Llama): three ffn matrices instead of two
  bool biases = true;           // GPT/Bloom/BERT linear layers have biases; T5/Llama do not
  bool dropout = true;          // dropout masks are stashed for the backward pass
  int vocab = 0;
  int seq_len = 0;              // decoder-only / encoder sequence length
  int decoder_seq_len = 0;      // T5 target length
  bool learned_positions = false;  // GPT, BERT: a seq_len x hidden position table
  bool tied_embeddings = true;     // the LM head reuses the input embedding
  bool embedding_norm = false;     // Bloom: LayerNorm right after the word embedding
  int token_types = 0;             // BERT segment embeddings

  int attention_width() const { return heads * head_dim; }
  int kv_width() const { return kv_heads * head_dim; }
};

// Wide-ResNet (Zagoruyko & Komodakis 2016) on ResNet-50/101 bottlenecks (He et al. 2016),
// widened as torchvision does: the 3x3 bottleneck width is planes * width_factor, the block
// output stays planes * 4.
struct ConvNetShape {
  int depth = 0;          // 50 or 101
  int width_factor = 0;   // 2 for torchvision's wide_resnet50_2; 8 here
  int image_size = 224;
  int classes = 1000;
};

struct ModelSpec {
  std::string name;          // catalogue key, e.g. "gpt3-13b"
  ModelFamily family = ModelFamily::kGpt;
  std::string description;
  std::string source;        // where the hyperparameters are published
  TransformerShape transformer;
  ConvNetShape convnet;
  int default_global_batch = 0;   // sequences (images) per iteration, as published
  double published_parameters = 0.0;

  bool is_transformer() const { return family != ModelFamily::kWideResNet; }
};

// The energy model of one GPU (energy_model.hpp explains each term). Fitted against the
// measured profiles by `calibrate`, or transferred from a sibling GPU.
struct EnergyModelParams {
  double gemm_efficiency_forward = 0.7;   // achieved share of peak FLOP/s at the top clock
  double gemm_efficiency_backward = 0.7;
  // Per-GPU matrix width at which matrix multiplies reach half of the efficiency above (0: no
  // fall-off with size). See energy_model.hpp.
  double gemm_half_width = 0.0;
  double memory_factor_forward = 1.0;     // bandwidth-bound traffic multiplier
  double memory_factor_backward = 1.0;
  double collective_scale = 1.0;          // multiplies the tensor-parallel collective bandwidth
  double static_power_w = 100.0;          // drawn whenever the GPU computes
  double compute_power_w = 300.0;         // dynamic power at the top clock, compute-bound
  double memory_power_w = 50.0;           // dynamic power at the top clock, bandwidth-bound
  double voltage_floor = 0.8;             // V(f)/V(f_max) never drops below this
  double power_limit_w = 400.0;           // the clock throttles to stay under this
};

// The time part of a GPU's model (at the top clock) fitted to published end-to-end training
// runs instead of to measured profiles (`perseus calibrate --published`, published_runs.hpp):
// matrix multiplies reach gemm_efficiency * w / (w + gemm_half_width) of the peak at per-GPU
// width w, bandwidth-bound traffic costs memory_factor passes, tensor-parallel collectives reach
// collective_scale of the link's bus bandwidth. Forward and backward share each value.
struct PublishedRunsFit {
  double gemm_efficiency = 0.0;
  double gemm_half_width = 0.0;
  double memory_factor = 0.0;
  double collective_scale = 1.0;
};

// Which time model the planner estimates with: the published runs' fit where the GPU has one
// (the default: end-to-end throughput as large runs reach it), or the profiles' fit (the
// bundled profiles' computation times, which run faster than those runs at the same shape).
enum class TimeModel { kPublishedRuns, kProfiles };
std::string_view to_string(TimeModel model);
// "published" / "profiles"; InputError otherwise.
TimeModel parse_time_model(std::string_view text);

struct GpuSpec {
  std::string name;           // catalogue key, e.g. "a100-sxm"
  std::string description;
  std::string source;
  double peak_flops = 0.0;            // dense FP16/BF16 tensor-core FLOP/s at the top clock
  double memory_bandwidth = 0.0;      // B/s
  double memory_bytes = 0.0;
  int min_mhz = 0;                    // supported SM clocks: min..max in step_mhz steps
  int max_mhz = 0;
  int step_mhz = 15;
  int profile_min_mhz = 0;            // default lowest clock of a synthetic profile
  double tdp_w = 0.0;
  double idle_power_w = 0.0;
  double p_blocking_w = 0.0;          // power while blocked on communication
  int gpus_per_node = 8;
  int sms = 0;                        // streaming multiprocessors (Kareus's SM allocation)
  std::string intra_node_link;
  double intra_node_busbw = 0.0;      // NCCL all-reduce bus bandwidth inside a node, B/s
  double p2p_bandwidth = 0.0;         // point-to-point inside a node, B/s
  double inter_node_bandwidth = 0.0;  // per GPU across nodes (InfiniBand), B/s
  EnergyModelParams energy;           // fitted to measured profiles (or transferred)
  std::optional<PublishedRunsFit> published_fit;  // its time part fitted to published runs
  std::string published_fit_source;   // which runs, on which GPU
  std::string calibration;            // how `energy` was obtained, and its error
  bool calibrated = false;            // fitted on this GPU's own measurements
};

// `energy` with its time part replaced by the published runs' fit.
EnergyModelParams with_published_fit(EnergyModelParams params, const PublishedRunsFit& fit);
// The parameters the planner estimates with: the published runs' fit when `model` asks for it
// and the GPU has one, `energy` otherwise.
EnergyModelParams planning_params(const GpuSpec& gpu, TimeModel model);

const std::vector<ModelSpec>& model_catalogue();
const std::vector<GpuSpec>& gpu_catalogue();

// Case-insensitive lookups; InputError listing the known names otherwise.
const ModelSpec& find_model(std::string_view name);

// A model given by its shape on the command line (--layers --hidden --heads --seq-len
// --vocab), as the PTD-P paper's weak-scaling models are: 0 leaves a value as it is.
struct ModelShape {
  int layers = 0, hidden = 0, heads = 0, seq_len = 0, vocab = 0;
  bool empty() const { return layers == 0 && hidden == 0 && heads == 0 && seq_len == 0 && vocab == 0; }
};
// The catalogue's `name` (empty: none) with `shape` applied. Without a name, a GPT of that
// shape (Megatron-LM's: 4h FFN, learned positions, tied embeddings; sequence 2048 and a vocabulary
// of 51,200 unless given), named for its shape; it needs layers, hidden and heads. A catalogue
// model takes --layers, --seq-len and --vocab (a wider one is another model: no name).
// InputError naming the flag for a value that does not make a model (heads not dividing the
// hidden size, a value below 1, a shape on a model that is not a Transformer).
ModelSpec resolve_model(std::string_view name, const ModelShape& shape);
const GpuSpec& find_gpu(std::string_view name);

// Frequencies a GPU supports, highest first, from `max_mhz` down to `lowest_mhz`
// (clamped to the supported range) in step_mhz steps.
std::vector<int> supported_frequencies(const GpuSpec& gpu, int lowest_mhz);

}  // namespace perseus::planner
