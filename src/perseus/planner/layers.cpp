#include "perseus/planner/layers.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "perseus/model/errors.hpp"

namespace perseus::planner {
namespace {

constexpr double kHalf = 2.0;  // bytes of an FP16/BF16 element
constexpr double kMask = 1.0;  // bytes of a dropout mask element

// Per-GPU volume of a ring all-reduce of `bytes` over t GPUs (NCCL's bus-bandwidth convention).
double ring_allreduce_bytes(double bytes, int t) { return t > 1 ? 2.0 * (t - 1) / t * bytes : 0.0; }

struct Dims {
  double b, s, h, t;
  bool sp;
  // Tensors replicated across the tensor-parallel group unless sequence parallelism splits them.
  double replicated(double bytes) const { return sp ? bytes / t : bytes; }
};

// Attention + MLP block shared by the decoder-only, encoder and T5 decoder layers.
LayerCost transformer_layer(const TransformerShape& m, const Workload& w, double s, std::string name) {
  const Dims d{static_cast<double>(w.microbatch_size), s, static_cast<double>(m.hidden),
               static_cast<double>(w.tensor_parallel), w.sequence_parallel};
  const double wa = m.attention_width();
  const double wkv = m.kv_width();
  const double f = m.ffn_hidden;
  const double h = d.h;
  const double a = m.heads;

  const double attention_matrices = h * wa + 2.0 * h * wkv + wa * h;
  const double mlp_matrices = (m.gated_mlp ? 3.0 : 2.0) * h * f;
  const double column_biases = m.biases ? wa + 2.0 * wkv + (m.gated_mlp ? 2.0 * f : f) : 0.0;
  const double row_biases = m.biases ? 2.0 * h : 0.0;
  const double norms = m.biases ? 4.0 * h : 2.0 * h;  // LayerNorm weight+bias, or RMSNorm weight

  LayerCost layer;
  layer.name = std::move(name);
  layer.kind = LayerKind::kTransformer;
  layer.unique_parameters = attention_matrices + mlp_matrices + column_biases + row_biases + norms;
  layer.parameters = (attention_matrices + mlp_matrices + column_biases) / d.t + row_biases + norms;
  // 2 FLOPs per multiply-add: 2*b*s*(matrix parameters) plus QK^T and AV, 2*b*s^2*wa each.
  layer.forward_flops = (2.0 * d.b * s * (attention_matrices + mlp_matrices) + 4.0 * d.b * s * s * wa) / d.t;

  const double sbh = s * d.b * h;
  const double masks = m.dropout ? 2.0 * kMask * sbh : 0.0;
  const double replicated = 2.0 * kHalf * sbh /* norm inputs */ + 2.0 * kHalf * sbh /* QKV, MLP inputs */ + masks;
  double split = kHalf * s * d.b * (wa + 2.0 * wkv) /* Q, K, V */ + kHalf * s * d.b * wa /* projection input */;
  split += (m.gated_mlp ? 3.0 : 2.0) * kHalf * s * d.b * f;  // activation input(s) and output
  if (!w.flash_attention) {
    // Softmax output (+ its dropout mask and output): 2 (or 5) * a * s^2 * b bytes.
    split += (m.dropout ? 5.0 : 2.0) * a * s * s * d.b;
  }
  layer.activation_bytes = d.replicated(replicated) + split / d.t;
  layer.checkpoint_bytes = d.replicated(kHalf * sbh);
  layer.memory_traffic_bytes = layer.activation_bytes;
  layer.tp_comm_bytes = 2.0 * ring_allreduce_bytes(kHalf * sbh, w.tensor_parallel);
  layer.output_bytes = kHalf * sbh;
  layer.gemm_width = wa / d.t;
  layer.recomputed = true;
  return layer;
}

// T5 decoder layer: the block above on the target plus cross-attention over the encoder output.
LayerCost cross_decoder_layer(const TransformerShape& m, const Workload& w, double s_enc, double s_dec,
                              std::string name) {
  LayerCost layer = transformer_layer(m, w, s_dec, std::move(name));
  layer.kind = LayerKind::kCrossDecoder;
  const double b = w.microbatch_size;
  const double t = w.tensor_parallel;
  const double h = m.hidden;
  const double wa = m.attention_width();
  const double cross_matrices = 4.0 * h * wa;
  const double norm = m.biases ? 2.0 * h : h;
  layer.unique_parameters += cross_matrices + norm;
  layer.parameters += cross_matrices / t + norm;
  // Q and output projection on the target, K and V on the encoder output, scores and context.
  layer.forward_flops += (2.0 * b * s_dec * 2.0 * h * wa + 2.0 * b * s_enc * 2.0 * h * wa +
                          4.0 * b * s_dec * s_enc * wa) / t;
  const double split = kHalf * b * (s_dec * wa + 2.0 * s_enc * wa + s_dec * wa) +
                       (m.dropout ? 5.0 : 2.0) * m.heads * s_dec * s_enc * b;
  const double replicated = kHalf * s_dec * b * h * 2.0 + (m.dropout ? kMask * s_dec * b * h : 0.0);
  const double added = (w.sequence_parallel ? replicated / t : replicated) + split / t;
  layer.activation_bytes += added;
  layer.memory_traffic_bytes += added;
  layer.tp_comm_bytes += ring_allreduce_bytes(kHalf * s_dec * b * h, w.tensor_parallel);
  // The encoder output travels with the decoder's hidden states through the pipeline.
  layer.output_bytes = kHalf * b * (s_dec + s_enc) * h;
  return layer;
}

LayerCost embedding_layer(const TransformerShape& m, const Workload& w, double s, std::string name,
                          bool copy) {
  const double b = w.microbatch_size;
  const double t = w.tensor_parallel;
  const double h = m.hidden;
  const double vocab_rows = std::ceil(static_cast<double>(m.vocab) / t);  // vocab-parallel, padded
  double positions = m.learned_positions ? s * h : 0.0;
  positions += m.token_types * h;
  const double norm = m.embedding_norm ? 2.0 * h : 0.0;
  LayerCost layer;
  layer.name = std::move(name);
  layer.kind = LayerKind::kEmbedding;
  layer.unique_parameters = copy ? 0.0 : m.vocab * h + positions + norm;
  layer.holds_tied_copy = copy;
  layer.tied_copy_parameters = copy ? vocab_rows * h : 0.0;
  layer.parameters = copy ? vocab_rows * h : vocab_rows * h + positions + norm;
  layer.forward_flops = 0.0;  // a lookup
  const double sbh = s * b * h;
  layer.activation_bytes = (m.dropout ? kMask * sbh : 0.0) + (m.embedding_norm ? kHalf * sbh : 0.0);
  layer.checkpoint_bytes = 0.0;
  layer.memory_traffic_bytes = 2.0 * kHalf * sbh + layer.activation_bytes;
  layer.tp_comm_bytes = ring_allreduce_bytes(kHalf * sbh, w.tensor_parallel);
  layer.output_bytes = kHalf * sbh;
  return layer;
}

LayerCost lm_head_layer(const ModelSpec& model, const Workload& w, double s) {
  const TransformerShape& m = model.transformer;
  const double b = w.microbatch_size;
  const double t = w.tensor_parallel;
  const double h = m.hidden;
  const double vocab_rows = std::ceil(static_cast<double>(m.vocab) / t);
  const double norm = m.biases ? 2.0 * h : h;
  LayerCost layer;
  layer.name = "lm_head";
  layer.kind = LayerKind::kLmHead;
  layer.holds_tied_copy = m.tied_embeddings;
  layer.tied_copy_parameters = m.tied_embeddings ? vocab_rows * h : 0.0;
  double unique = norm + (m.tied_embeddings ? 0.0 : m.vocab * h);
  double local = norm + vocab_rows * h;
  double flops = 2.0 * b * s * h * vocab_rows;
  double activations = kHalf * s * b * h;  // norm input
  if (model.family == ModelFamily::kBert) {
    // Masked-LM transform (dense h x h, GeLU, LayerNorm), output bias; pooler and NSP classifier.
    const double extra = (h * h + h) + 2.0 * h + m.vocab + (h * h + h) + (2.0 * h + 2.0);
    unique += extra;
    local += extra;
    flops += 2.0 * b * s * h * h;
    activations += 3.0 * kHalf * s * b * h;
  }
  layer.unique_parameters = unique;
  layer.parameters = local;
  layer.forward_flops = flops;
  layer.gemm_width = h;  // logits: [tokens x h] x [h x V/t]
  // Vocab-parallel cross-entropy keeps FP32 logits (softmax) for the backward pass.
  activations += 4.0 * s * b * vocab_rows;
  layer.activation_bytes = activations;
  layer.checkpoint_bytes = kHalf * s * b * h;
  layer.memory_traffic_bytes = activations;
  layer.tp_comm_bytes = w.sequence_parallel ? ring_allreduce_bytes(kHalf * s * b * h, w.tensor_parallel) / 2.0 : 0.0;
  layer.output_bytes = 0.0;
  return layer;
}

// ResNet bottleneck with torchvision's widening: conv1x1(in->w), conv3x3(w->w, stride),
// conv1x1(w->4p), each followed by batch norm; a 1x1 projection on the first block of a stage.
LayerCost bottleneck_block(double in, double planes, double width_factor, double h_in, int stride,
                           bool downsample, double b, std::string name) {
  const double w = planes * width_factor;
  const double out = planes * 4.0;
  const double h_out = h_in / stride;
  const double a_in = h_in * h_in;
  const double a_out = h_out * h_out;
  LayerCost layer;
  layer.name = std::move(name);
  layer.kind = LayerKind::kConvBlock;
  double params = in * w + 9.0 * w * w + w * out + 2.0 * w + 2.0 * w + 2.0 * out;
  double macs = in * w * a_in + 9.0 * w * w * a_out + w * out * a_out;
  double stash = in * a_in + 3.0 * w * a_in + 3.0 * w * a_out + 2.0 * out * a_out;
  if (downsample) {
    params += in * out + 2.0 * out;
    macs += in * out * a_out;
    stash += 2.0 * out * a_out;
  }
  layer.parameters = layer.unique_parameters = params;
  layer.forward_flops = 2.0 * macs * b;
  layer.activation_bytes = kHalf * stash * b;
  layer.checkpoint_bytes = kHalf * in * a_in * b;
  layer.memory_traffic_bytes = layer.activation_bytes;
  layer.output_bytes = kHalf * out * a_out * b;
  layer.gemm_width = std::min(in, w);  // as implicit GEMMs: channels are their narrow side
  layer.recomputed = true;
  return layer;
}

std::vector<LayerCost> wide_resnet_layers(const ModelSpec& model, const Workload& w) {
  const ConvNetShape& net = model.convnet;
  const double b = w.microbatch_size;
  std::vector<LayerCost> layers;
  const double image = net.image_size;
  {
    // 7x7/2 convolution 3->64, batch norm, ReLU, 3x3/2 max pool.
    const double h1 = image / 2.0;
    LayerCost stem;
    stem.name = "stem";
    stem.kind = LayerKind::kConvStem;
    stem.parameters = stem.unique_parameters = 49.0 * 3.0 * 64.0 + 2.0 * 64.0;
    stem.forward_flops = 2.0 * 49.0 * 3.0 * 64.0 * h1 * h1 * b;
    stem.activation_bytes = kHalf * b * (3.0 * image * image + 3.0 * 64.0 * h1 * h1);
    stem.checkpoint_bytes = kHalf * b * 3.0 * image * image;
    stem.memory_traffic_bytes = stem.activation_bytes;
    stem.output_bytes = kHalf * b * 64.0 * (h1 / 2.0) * (h1 / 2.0);
    layers.push_back(stem);
  }
  const int blocks_50[4] = {3, 4, 6, 3};
  const int blocks_101[4] = {3, 4, 23, 3};
  const int* blocks = net.depth == 101 ? blocks_101 : blocks_50;
  double in = 64.0;
  double spatial = image / 4.0;
  for (int stage = 0; stage < 4; ++stage) {
    const double planes = 64.0 * (1 << stage);
    for (int i = 0; i < blocks[stage]; ++i) {
      const int stride = (i == 0 && stage > 0) ? 2 : 1;
      layers.push_back(bottleneck_block(in, planes, net.width_factor, spatial, stride, i == 0, b,
                                        "block" + std::to_string(stage + 1) + "." + std::to_string(i)));
      spatial /= stride;
      in = planes * 4.0;
    }
  }
  LayerCost head;
  head.name = "classifier";
  head.kind = LayerKind::kClassifier;
  head.parameters = head.unique_parameters = in * net.classes + net.classes;
  head.forward_flops = 2.0 * in * net.classes * b + in * spatial * spatial * b;
  head.activation_bytes = kHalf * b * (in * spatial * spatial + in);
  head.checkpoint_bytes = kHalf * b * in * spatial * spatial;
  head.memory_traffic_bytes = head.activation_bytes + 4.0 * b * net.classes;
  layers.push_back(head);
  return layers;
}

}  // namespace

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::kEmbedding: return "embedding";
    case LayerKind::kTransformer: return "transformer";
    case LayerKind::kCrossDecoder: return "decoder";
    case LayerKind::kLmHead: return "lm_head";
    case LayerKind::kConvStem: return "stem";
    case LayerKind::kConvBlock: return "bottleneck";
    case LayerKind::kClassifier: return "classifier";
  }
  return "unknown";
}

bool tensor_parallel_divides(const ModelSpec& model, int t, std::string* why) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (t < 1) return fail("the tensor-parallel degree must be at least 1");
  if (!model.is_transformer()) {
    return t == 1 ? true : fail("tensor parallelism is not modelled for convolutional networks (" + model.name + ")");
  }
  const TransformerShape& m = model.transformer;
  if (m.heads % t != 0) {
    return fail("tensor parallelism " + std::to_string(t) + " does not divide " + model.name + "'s " +
                std::to_string(m.heads) + " attention heads");
  }
  if (m.kv_heads % t != 0 && t % m.kv_heads != 0) {
    return fail("tensor parallelism " + std::to_string(t) + " neither divides nor is a multiple of " +
                model.name + "'s " + std::to_string(m.kv_heads) + " KV heads");
  }
  if (m.ffn_hidden % t != 0) {
    return fail("tensor parallelism " + std::to_string(t) + " does not divide " + model.name + "'s FFN width " +
                std::to_string(m.ffn_hidden));
  }
  return true;
}

std::vector<LayerCost> model_layers(const ModelSpec& model, const Workload& workload) {
  if (workload.microbatch_size < 1) throw InputError("the microbatch size must be at least 1");
  std::string why;
  if (!tensor_parallel_divides(model, workload.tensor_parallel, &why)) throw InputError(why);
  if (!model.is_transformer()) return wide_resnet_layers(model, workload);

  const TransformerShape& m = model.transformer;
  const double s = workload.seq_len > 0 ? workload.seq_len : m.seq_len;
  std::vector<LayerCost> layers;
  layers.push_back(embedding_layer(m, workload, s, "embedding", false));
  for (int i = 0; i < m.layers; ++i) {
    layers.push_back(transformer_layer(m, workload, s, (model.family == ModelFamily::kT5 ? "encoder" : "layer") +
                                                           std::to_string(i)));
  }
  double head_seq = s;
  if (model.family == ModelFamily::kT5) {
    const double s_dec = m.decoder_seq_len;
    // The decoder embeds the targets with the shared table: a copy on the decoder's stage.
    LayerCost dec_embedding = embedding_layer(m, workload, s_dec, "decoder_embedding", true);
    dec_embedding.output_bytes = kHalf * workload.microbatch_size * (s_dec + s) * m.hidden;
    layers.back().output_bytes = kHalf * workload.microbatch_size * s * m.hidden;
    layers.push_back(dec_embedding);
    for (int i = 0; i < m.decoder_layers; ++i) {
      layers.push_back(cross_decoder_layer(m, workload, s, s_dec, "decoder" + std::to_string(i)));
    }
    head_seq = s_dec;
  }
  layers.push_back(lm_head_layer(model, workload, head_seq));
  return layers;
}

double total_parameters(const std::vector<LayerCost>& layers) {
  double total = 0.0;
  for (const LayerCost& layer : layers) total += layer.unique_parameters;
  return total;
}

}  // namespace perseus::planner
