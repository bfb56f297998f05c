#include "perseus/planner/catalogue.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::planner {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// GPT-3: Brown et al., "Language Models are Few-Shot Learners" (2020), Table 2.1. Two
// published rows are not self-consistent and are taken as Megatron-LM configures them:
// 1.3B lists 24 heads of 128 (3072 != d_model 2048), 13B lists d_model 5140 (40 x 128 = 5120).
ModelSpec gpt3(std::string name, int layers, int hidden, int heads, int batch, double params) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kGpt;
  m.description = "GPT-3 " + m.name.substr(5) + " decoder-only Transformer";
  m.source = "Brown et al. 2020 (GPT-3), Table 2.1";
  TransformerShape& t = m.transformer;
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.head_dim = hidden / heads;
  t.ffn_hidden = 4 * hidden;
  t.vocab = 50257;
  t.seq_len = 2048;
  t.learned_positions = true;
  m.default_global_batch = batch;
  m.published_parameters = params;
  return m;
}

// Atlas (Palak et al. 2024), Section 3: GPT-A (L, H = 4K, 4K) and GPT-B (6K, 8K), GPT-2/3's
// architecture with fewer layers. No published parameter count.
ModelSpec atlas_gpt(std::string name, int layers, int hidden, int heads, int seq_len) {
  ModelSpec m = gpt3(std::move(name), layers, hidden, heads, 512, 0.0);
  m.description = std::string(m.name == "gpt-a" ? "GPT-A" : "GPT-B") + " of Atlas: GPT-3's architecture, " +
                  std::to_string(layers) + " layers, hidden " + std::to_string(hidden) + ", context " +
                  std::to_string(seq_len);
  m.source = "Palak et al. 2024 (Atlas and BubbleTea), Section 3";
  m.transformer.seq_len = seq_len;
  return m;
}

// BLOOM: BigScience, "BLOOM: A 176B-Parameter Open-Access Multilingual Language Model"
// (2022), Table 3. ALiBi positions (no parameters), LayerNorm after the embedding, no dropout.
ModelSpec bloom(std::string name, int layers, int hidden, int heads, int batch, double params) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kBloom;
  m.description = "BLOOM decoder-only Transformer (ALiBi)";
  m.source = "BigScience 2022 (BLOOM), Table 3";
  TransformerShape& t = m.transformer;
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.head_dim = hidden / heads;
  t.ffn_hidden = 4 * hidden;
  t.vocab = 250880;
  t.seq_len = 2048;
  t.embedding_norm = true;
  t.dropout = false;
  m.default_global_batch = batch;
  m.published_parameters = params;
  return m;
}

// BERT: Devlin et al. 2019 (base, large); the 1.3B model with hidden size 2048 is
// Megatron-LM's (Shoeybi et al. 2019, Table 4: 24 layers, 32 heads). Sequence length 512.
ModelSpec bert(std::string name, int layers, int hidden, int heads, double params, std::string source) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kBert;
  m.description = "BERT encoder with the masked-LM head";
  m.source = std::move(source);
  TransformerShape& t = m.transformer;
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.head_dim = hidden / heads;
  t.ffn_hidden = 4 * hidden;
  t.vocab = 30522;
  t.seq_len = 512;
  t.learned_positions = true;
  t.token_types = 2;
  t.embedding_norm = true;
  m.default_global_batch = 256;
  m.published_parameters = params;
  return m;
}

// T5: Raffel et al. 2020, Section 3.7 and the released configurations. No biases, a shared
// (tied) embedding, encoder input 512 tokens; decoder 128 tokens as Megatron-LM trains it.
ModelSpec t5(std::string name, int layers, int hidden, int heads, int head_dim, int ffn, double params) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kT5;
  m.description = "T5 encoder-decoder Transformer";
  m.source = "Raffel et al. 2020 (T5), Section 3.7";
  TransformerShape& t = m.transformer;
  t.layers = layers;
  t.decoder_layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.head_dim = head_dim;
  t.ffn_hidden = ffn;
  t.biases = false;
  t.vocab = 32128;
  t.seq_len = 512;
  t.decoder_seq_len = 128;
  m.default_global_batch = 128;
  m.published_parameters = params;
  return m;
}

// Llama 3: Dubey et al., "The Llama 3 Herd of Models" (2024), Table 3; the 3B model is
// Llama 3.2's (model card). Grouped-query attention with 8 KV heads, SwiGLU, RMSNorm, RoPE.
ModelSpec llama3(std::string name, int layers, int hidden, int heads, int ffn, bool tied, double params,
                 std::string source) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kLlama;
  m.description = "Llama 3 decoder-only Transformer (GQA, SwiGLU)";
  m.source = std::move(source);
  TransformerShape& t = m.transformer;
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = 8;
  t.head_dim = hidden / heads;
  t.ffn_hidden = ffn;
  t.gated_mlp = true;
  t.biases = false;
  t.dropout = false;
  t.vocab = 128256;
  t.seq_len = 8192;
  t.tied_embeddings = tied;
  m.default_global_batch = 512;  // 4M tokens of 8192
  m.published_parameters = params;
  return m;
}

// Qwen 3: Llama-3-like (GQA with 8 KV heads, SwiGLU, RMSNorm, RoPE) with a head width of its
// own (16 heads of 128 on a 2048 model), tied embeddings and a 151,936-token vocabulary.
ModelSpec qwen3(std::string name, int layers, int hidden, int heads, int head_dim, int ffn, double params,
                std::string source) {
  ModelSpec m = llama3(std::move(name), layers, hidden, heads, ffn, true, params, std::move(source));
  m.description = "Qwen 3 decoder-only Transformer (GQA, SwiGLU)";
  m.transformer.head_dim = head_dim;
  m.transformer.vocab = 151936;
  m.transformer.seq_len = 4096;
  return m;
}

ModelSpec wide_resnet(std::string name, int depth) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = ModelFamily::kWideResNet;
  m.description = "Wide-ResNet-" + std::to_string(depth) + " with width factor 8 (ImageNet, 224x224)";
  m.source = "Zagoruyko & Komodakis 2016; He et al. 2016 (bottleneck ResNet); torchvision widening";
  m.convnet = {depth, 8, 224, 1000};
  m.default_global_batch = 1024;
  return m;
}

std::vector<ModelSpec> build_models() {
  std::vector<ModelSpec> models;
  models.push_back(gpt3("gpt3-1.3b", 24, 2048, 16, 512, 1.3e9));
  models.push_back(gpt3("gpt3-2.7b", 32, 2560, 32, 512, 2.7e9));
  models.push_back(gpt3("gpt3-6.7b", 32, 4096, 32, 1024, 6.7e9));
  models.push_back(gpt3("gpt3-13b", 40, 5120, 40, 1024, 13.0e9));
  models.push_back(gpt3("gpt3-175b", 96, 12288, 96, 1536, 175.0e9));
  models.push_back(bloom("bloom-3b", 30, 2560, 32, 512, 3.0e9));
  models.push_back(bloom("bloom-7b", 30, 4096, 32, 512, 7.1e9));
  models.push_back(bloom("bloom-176b", 70, 14336, 112, 2048, 176.0e9));
  models.push_back(bert("bert-base", 12, 768, 12, 110e6, "Devlin et al. 2019 (BERT)"));
  models.push_back(bert("bert-large", 24, 1024, 16, 340e6, "Devlin et al. 2019 (BERT)"));
  models.push_back(bert("bert-huge", 24, 2048, 32, 1.3e9, "Shoeybi et al. 2019 (Megatron-LM), Table 4"));
  models.push_back(t5("t5-base", 12, 768, 12, 64, 3072, 220e6));
  models.push_back(t5("t5-large", 24, 1024, 16, 64, 4096, 770e6));
  models.push_back(t5("t5-3b", 24, 1024, 32, 128, 16384, 2.8e9));
  models.push_back(llama3("llama3-3b", 28, 3072, 24, 8192, true, 3.2e9, "Meta 2024, Llama 3.2 model card (3B)"));
  models.push_back(llama3("llama3-8b", 32, 4096, 32, 14336, false, 8.0e9, "Dubey et al. 2024 (Llama 3), Table 3"));
  models.push_back(llama3("llama3-70b", 80, 8192, 64, 28672, false, 70.6e9, "Dubey et al. 2024 (Llama 3), Table 3"));
  // The Kareus paper's workloads under their release names (Llama 3.2 3B and 3.3 70B have the
  // shapes of Llama 3's 3B and 70B).
  models.push_back(llama3("llama3.2-3b", 28, 3072, 24, 8192, true, 3.2e9, "Meta 2024, Llama 3.2 model card (3B)"));
  models.push_back(llama3("llama3.3-70b", 80, 8192, 64, 28672, false, 70.6e9, "Meta 2024, Llama 3.3 model card (70B)"));
  models.push_back(qwen3("qwen3-1.7b", 28, 2048, 16, 128, 6144, 1.7e9, "Qwen Team 2025 (Qwen3 technical report), Table 1"));
  // Atlas's GPT-A and GPT-B (geo-distributed training, docs/geo.md): GPT-3's architecture at a
  // context of 4K and 6K tokens and a hidden size of 4K and 8K. The paper cuts the layer count to
  // fit its testbed without saying how many; we take 8 and 4 (two and one per stage of its 4-stage
  // pipelines), and `perseus geo --layers` changes it.
  models.push_back(atlas_gpt("gpt-a", 8, 4096, 32, 4096));
  models.push_back(atlas_gpt("gpt-b", 4, 8192, 64, 6144));
  models.push_back(wide_resnet("wide-resnet50-8", 50));
  models.push_back(wide_resnet("wide-resnet101-8", 101));
  return models;
}

// Energy-model parameters. A100-SXM and A40 are fitted by `perseus calibrate` on the bundled
// GPT-3 175B and Bloom 176B profiles (docs/planner.md has the errors); the other GPUs have no
// measured profile here, so they take the closest calibrated GPU's efficiencies and power
// shape, with the power limit scaled to their TDP.
// Fitted by `perseus calibrate --profile .../gpt3-175b+a100-sxm.csv --profile .../bloom-176b+a100-sxm.csv`.
constexpr EnergyModelParams kA100SxmFit{
    .gemm_efficiency_forward = 0.917248,
    .gemm_efficiency_backward = 0.891737,
    .memory_factor_forward = 0.358013,
    .memory_factor_backward = 0.0,
    .collective_scale = 1.0,
    .static_power_w = 72.9158,
    .compute_power_w = 440.561,
    .memory_power_w = 354.976,
    .voltage_floor = 0.783292,
    .power_limit_w = 473.599,
};
// Fitted with --fit-collective: the A40 profiles show almost no time that does not scale with
// the clock, which tensor parallelism 8 over PCIe would add, so the collectives' bandwidth is
// fitted too (11.7x the PCIe figure) and the backward efficiency comes out slightly above 1.
// The A40 profiles were probably measured in another configuration than the A100 ones; treat
// A40 predictions for other configurations with care (docs/planner.md).
constexpr EnergyModelParams kA40Fit{
    .gemm_efficiency_forward = 0.905223,
    .gemm_efficiency_backward = 1.01462,
    .memory_factor_forward = 0.0,
    .memory_factor_backward = 6.84945,
    .collective_scale = 11.7095,
    .static_power_w = 30.0,
    .compute_power_w = 613.409,
    .memory_power_w = 438.813,
    .voltage_floor = 0.673927,
    .power_limit_w = 287.066,
};

// A fitted model moved to another part, its power limit scaled to that part but no higher than
// its TDP: the A100-SXM fit's 474 W (above its 400 W TDP) is an effective parameter that the
// measured profiles support; a part without measured profiles has only its datasheet's limit.
// Fitted by `perseus calibrate --published data/published/ptdp.csv`: the 17 PTD-P runs of
// Narayanan's dissertation on A100-80GB (Megatron-LM, 2021), end to end (docs/planner.md has
// the per-run and leave-one-out errors).
// Each run is estimated as it ran, Megatron-LM's equal layer split included. The half width
// comes out at zero, next to per-GPU widths of 768 to 3,200 in these runs: once bandwidth-bound
// passes and collectives are charged, they show no fall-off of matrix efficiency with width (the
// fit is flat in it). The collectives reach the nominal 230 GB/s bus bandwidth.
constexpr PublishedRunsFit kA100PtdpFit{
    .gemm_efficiency = 0.654664,
    .gemm_half_width = 0.000615,
    .memory_factor = 2.52419,
    .collective_scale = 0.999860,
};
constexpr const char* kA100PtdpSource = "the 17 published PTD-P runs on A100-80GB (Narayanan's dissertation, 2021)";

EnergyModelParams transferred(EnergyModelParams from, double power_limit_w, double tdp_w) {
  from.power_limit_w = std::min(power_limit_w, tdp_w);
  return from;
}

std::vector<GpuSpec> build_gpus() {
  std::vector<GpuSpec> gpus;
  {
    GpuSpec g;
    g.name = "a100-sxm";
    g.sms = 108;
    g.description = "NVIDIA A100 SXM4 80GB";
    g.source = "NVIDIA A100 datasheet (2021); NVLink 3, HGX A100 with 8x HDR 200 Gb/s";
    g.peak_flops = 312e12;
    g.memory_bandwidth = 2039e9;
    g.memory_bytes = 80.0 * (1ull << 30);
    g.min_mhz = 210;
    g.max_mhz = 1410;
    g.profile_min_mhz = 855;
    g.tdp_w = 400;
    g.idle_power_w = 55;
    g.p_blocking_w = 83.64;
    g.intra_node_link = "NVLink 3 (600 GB/s)";
    g.intra_node_busbw = 230e9;
    g.p2p_bandwidth = 250e9;
    g.inter_node_bandwidth = 25e9;
    g.energy = kA100SxmFit;
    g.published_fit = kA100PtdpFit;
    g.published_fit_source = kA100PtdpSource;
    g.calibrated = true;
    gpus.push_back(g);
  }
  {
    GpuSpec g;
    g.name = "a100-pcie";
    g.sms = 108;
    g.description = "NVIDIA A100 PCIe 80GB";
    g.source = "NVIDIA A100 datasheet (2021); PCIe 4.0 x16, 100 Gb/s per GPU across nodes";
    g.peak_flops = 312e12;
    g.memory_bandwidth = 1935e9;
    g.memory_bytes = 80.0 * (1ull << 30);
    g.min_mhz = 210;
    g.max_mhz = 1410;
    g.profile_min_mhz = 855;
    g.tdp_w = 300;
    g.idle_power_w = 45;
    g.p_blocking_w = 83.64;
    g.intra_node_link = "PCIe 4.0 x16 (64 GB/s)";
    g.intra_node_busbw = 22e9;
    g.p2p_bandwidth = 25e9;
    g.inter_node_bandwidth = 12.5e9;
    // Same silicon as the SXM part; the lower board power limit makes it throttle earlier.
    g.energy = transferred(kA100SxmFit, kA100SxmFit.power_limit_w * 300.0 / 400.0, g.tdp_w);
    g.published_fit = kA100PtdpFit;
    g.published_fit_source = std::string(kA100PtdpSource) + ", transferred from a100-sxm";
    g.calibration = "transferred from a100-sxm, power limit scaled to the 300 W TDP, at most the TDP (no measured profile)";
    gpus.push_back(g);
  }
  {
    GpuSpec g;
    g.name = "a40";
    g.sms = 84;
    g.description = "NVIDIA A40 48GB";
    g.source = "NVIDIA A40 datasheet (2021); PCIe 4.0 x16, 100 Gb/s per GPU across nodes";
    g.peak_flops = 149.7e12;
    g.memory_bandwidth = 696e9;
    g.memory_bytes = 48.0 * (1ull << 30);
    g.min_mhz = 210;
    g.max_mhz = 1740;
    g.profile_min_mhz = 855;
    g.tdp_w = 300;
    g.idle_power_w = 30;
    g.p_blocking_w = 70.38;
    g.intra_node_link = "PCIe 4.0 x16 (64 GB/s)";
    g.intra_node_busbw = 20e9;
    g.p2p_bandwidth = 25e9;
    g.inter_node_bandwidth = 12.5e9;
    g.energy = kA40Fit;
    g.calibrated = true;
    gpus.push_back(g);
  }
  {
    GpuSpec g;
    g.name = "h100-sxm";
    g.sms = 132;
    g.description = "NVIDIA H100 SXM5 80GB";
    g.source = "NVIDIA H100 datasheet (2023); NVLink 4, HGX H100 with 8x NDR 400 Gb/s";
    g.peak_flops = 989.4e12;
    g.memory_bandwidth = 3350e9;
    g.memory_bytes = 80.0 * (1ull << 30);
    g.min_mhz = 210;
    g.max_mhz = 1980;
    g.profile_min_mhz = 1005;
    g.tdp_w = 700;
    g.idle_power_w = 70;
    g.p_blocking_w = 110.0;  // estimate: A100's blocking-to-idle ratio; no reference measurement
    g.intra_node_link = "NVLink 4 (900 GB/s)";
    g.intra_node_busbw = 360e9;
    g.p2p_bandwidth = 370e9;
    g.inter_node_bandwidth = 50e9;
    EnergyModelParams e = transferred(kA100SxmFit, kA100SxmFit.power_limit_w * 700.0 / 400.0, g.tdp_w);
    e.static_power_w *= 700.0 / 400.0;
    e.compute_power_w *= 700.0 / 400.0;
    e.memory_power_w *= 700.0 / 400.0;
    g.energy = e;
    g.published_fit = kA100PtdpFit;
    g.published_fit_source = std::string(kA100PtdpSource) + ", transferred from a100-sxm (no published H100 runs here)";
    g.calibration = "transferred from a100-sxm, powers scaled by the TDP ratio 700/400, power limit at most the TDP "
                    "(no measured profile)";
    gpus.push_back(g);
  }
  return gpus;
}

template <typename T>
const T& find_named(const std::vector<T>& items, std::string_view name, std::string_view what) {
  const std::string key = lower(name);
  for (const T& item : items) {
    if (item.name == key) return item;
  }
  // Common spellings: "gpt3_13b", "GPT-3-13B", "bloom-7b1", "a100".
  std::string relaxed;
  for (char c : key) relaxed += c == '_' ? '-' : c;
  if (relaxed.rfind("gpt-3", 0) == 0) relaxed = "gpt3" + relaxed.substr(5);
  if (relaxed == "bloom-7b1") relaxed = "bloom-7b";
  if (relaxed == "a100" || relaxed == "a100-sxm4") relaxed = "a100-sxm";
  if (relaxed == "h100") relaxed = "h100-sxm";
  for (const T& item : items) {
    if (item.name == relaxed) return item;
  }
  std::string known;
  for (const T& item : items) known += (known.empty() ? "" : ", ") + item.name;
  throw InputError("unknown " + std::string(what) + " '" + std::string(name) + "'; known " + std::string(what) +
                   "s: " + known);
}

}  // namespace

std::string_view to_string(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt: return "gpt3";
    case ModelFamily::kBloom: return "bloom";
    case ModelFamily::kBert: return "bert";
    case ModelFamily::kT5: return "t5";
    case ModelFamily::kLlama: return "llama3";
    case ModelFamily::kWideResNet: return "wide-resnet";
  }
  return "unknown";
}

const std::vector<ModelSpec>& model_catalogue() {
  static const std::vector<ModelSpec> models = build_models();
  return models;
}

const std::vector<GpuSpec>& gpu_catalogue() {
  static const std::vector<GpuSpec> gpus = build_gpus();
  return gpus;
}

const ModelSpec& find_model(std::string_view name) { return find_named(model_catalogue(), name, "model"); }
const GpuSpec& find_gpu(std::string_view name) { return find_named(gpu_catalogue(), name, "GPU"); }

std::string_view to_string(TimeModel model) {
  return model == TimeModel::kPublishedRuns ? "published" : "profiles";
}

TimeModel parse_time_model(std::string_view text) {
  if (text == "published") return TimeModel::kPublishedRuns;
  if (text == "profiles") return TimeModel::kProfiles;
  throw InputError(fmt::format("--time-model {}: expected published (fitted to published end-to-end runs) or "
                               "profiles (fitted to the measured profiles)",
                               text));
}

EnergyModelParams with_published_fit(EnergyModelParams params, const PublishedRunsFit& fit) {
  params.gemm_efficiency_forward = params.gemm_efficiency_backward = fit.gemm_efficiency;
  params.gemm_half_width = fit.gemm_half_width;
  params.memory_factor_forward = params.memory_factor_backward = fit.memory_factor;
  params.collective_scale = fit.collective_scale;
  return params;
}

EnergyModelParams planning_params(const GpuSpec& gpu, TimeModel model) {
  if (model == TimeModel::kPublishedRuns && gpu.published_fit) return with_published_fit(gpu.energy, *gpu.published_fit);
  return gpu.energy;
}

ModelSpec resolve_model(std::string_view name, const ModelShape& shape) {
  for (const auto& [value, flag] : {std::pair{shape.layers, "--layers"}, std::pair{shape.hidden, "--hidden"},
                                    std::pair{shape.heads, "--heads"}, std::pair{shape.seq_len, "--seq-len"},
                                    std::pair{shape.vocab, "--vocab"}})
    if (value < 0) throw InputError(fmt::format("{} {}: must be positive", flag, value));
  if (name.empty()) {
    if (shape.layers == 0 || shape.hidden == 0 || shape.heads == 0)
      throw InputError("a model: give --model (perseus models), or --layers, --hidden and --heads for a GPT of that shape");
    if (shape.hidden % shape.heads != 0)
      throw InputError(fmt::format("--heads {} does not divide --hidden {}", shape.heads, shape.hidden));
    ModelSpec m = gpt3(fmt::format("gpt-l{}-h{}-a{}", shape.layers, shape.hidden, shape.heads), shape.layers, shape.hidden,
                       shape.heads, 512, 0.0);
    m.description = fmt::format("GPT of {} layers, hidden size {}, {} heads (given by its shape)", shape.layers, shape.hidden, shape.heads);
    m.source = "the command line (Megatron-LM's GPT: 4h FFN, learned positions, tied embeddings)";
    m.transformer.vocab = shape.vocab > 0 ? shape.vocab : 51200;
    m.transformer.seq_len = shape.seq_len > 0 ? shape.seq_len : 2048;
    return m;
  }
  ModelSpec m = find_model(name);
  if (shape.empty()) return m;
  if (!m.is_transformer()) throw InputError(fmt::format("{} is not a Transformer: --layers, --seq-len and --vocab do not apply", m.name));
  if (shape.hidden != 0 || shape.heads != 0)
    throw InputError(fmt::format("--hidden and --heads make another model: give them without --model {} (with --layers)", m.name));
  if (shape.layers > 0) m.transformer.layers = shape.layers;
  if (shape.seq_len > 0) m.transformer.seq_len = shape.seq_len;
  if (shape.vocab > 0) m.transformer.vocab = shape.vocab;
  m.published_parameters = 0.0;  // another size than published
  m.name += fmt::format("-l{}-s{}-v{}", m.transformer.layers, m.transformer.seq_len, m.transformer.vocab);
  return m;
}

std::vector<int> supported_frequencies(const GpuSpec& gpu, int lowest_mhz) {
  const int lowest = std::clamp(lowest_mhz, gpu.min_mhz, gpu.max_mhz);
  std::vector<int> out;
  for (int f = gpu.max_mhz; f >= lowest; f -= gpu.step_mhz) out.push_back(f);
  return out;
}

}  // namespace perseus::planner
