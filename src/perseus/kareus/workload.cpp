#include "perseus/kareus/workload.hpp"

#include <fmt/format.h>

namespace perseus::kareus {

bool Kernel::memory_bound(const planner::GpuSpec& gpu) const {
  return bytes / gpu.memory_bandwidth > flops / gpu.peak_flops;
}

int Workload::layers_per_stage() const { return model.transformer.layers / pipeline_parallel; }

void validate(const Workload& w) {
  const std::string where = fmt::format("kareus workload {} on {}", w.model.name, w.gpu.name);
  if (!w.model.is_transformer() || w.model.family == planner::ModelFamily::kT5 ||
      w.model.family == planner::ModelFamily::kBert) {
    throw InputError(where + ": partitioned overlap is modelled for decoder-only Transformers (GPT, Bloom, Llama, Qwen)");
  }
  const planner::TransformerShape& t = w.model.transformer;
  const int kv_heads = t.kv_heads > 0 ? t.kv_heads : t.heads;
  if (w.tensor_parallel < 1 || t.heads % w.tensor_parallel != 0 || kv_heads % w.tensor_parallel != 0) {
    throw InputError(fmt::format("{}: tensor parallelism {} must divide the {} heads and {} KV heads", where,
                                 w.tensor_parallel, t.heads, kv_heads));
  }
  if (w.context_parallel < 1) throw InputError(fmt::format("{}: context parallelism must be >= 1", where));
  if (w.tensor_parallel * w.context_parallel < 2) {
    throw InputError(where + ": with neither tensor nor context parallelism there is no collective to overlap");
  }
  if (w.pipeline_parallel < 1 || t.layers % w.pipeline_parallel != 0) {
    throw InputError(fmt::format("{}: pipeline parallelism {} must divide the {} layers", where, w.pipeline_parallel,
                                 t.layers));
  }
  if (w.microbatch_size < 2 || w.microbatch_size % 2 != 0) {
    throw InputError(fmt::format("{}: the microbatch size must be even (two nanobatches), not {}", where,
                                 w.microbatch_size));
  }
  const int seq = w.seq_len > 0 ? w.seq_len : t.seq_len;
  if (seq < 1 || seq % w.context_parallel != 0) {
    throw InputError(fmt::format("{}: context parallelism {} must divide the sequence length {}", where,
                                 w.context_parallel, seq));
  }
  if (w.tensor_parallel * w.context_parallel > w.gpu.gpus_per_node) {
    throw InputError(fmt::format("{}: TP {} x CP {} spans more than a node of {} GPUs (the model assumes NVLink)",
                                 where, w.tensor_parallel, w.context_parallel, w.gpu.gpus_per_node));
  }
  if (w.microbatches < 1) throw InputError(fmt::format("{}: microbatches must be >= 1", where));
  if (w.gpu.sms < 1) throw InputError(fmt::format("{}: the GPU's SM count is unknown", where));
}

std::vector<Partition> layer_partitions(const Workload& w) {
  validate(w);
  const planner::TransformerShape& shape = w.model.transformer;
  const double tp = w.tensor_parallel, cp = w.context_parallel;
  const double seq = (w.seq_len > 0 ? w.seq_len : shape.seq_len) / cp;  // tokens of one sequence on this GPU
  const double tokens = w.microbatch_size / 2.0 * seq;                  // of one nanobatch
  const double h = shape.hidden, a = shape.attention_width() / tp;
  const double kv = (shape.kv_heads > 0 ? shape.kv_width() : shape.attention_width()) / tp;
  const double ffn = shape.ffn_hidden / tp, ffn_in = shape.gated_mlp ? 2 * ffn : ffn;
  constexpr double e = 2.0;  // bytes per element (fp16/bf16)

  // A linear layer of `in` x `out` on `tokens` tokens: FLOPs, and its weights, input and output.
  const auto linear = [&](std::string name, double in, double out, double factor) {
    return Kernel{std::move(name), factor * 2.0 * tokens * in * out, factor * e * (in * out + tokens * (in + out))};
  };
  const auto memory = [&](std::string name, double bytes) { return Kernel{std::move(name), 0.0, bytes}; };
  // Causal attention over the whole sequence (K and V gathered across the CP ranks).
  const double attention_flops = 2.0 * tokens * (seq * cp) * a;
  const double attention_bytes = e * (tokens * (2 * a) + tokens * cp * 2 * kv);

  // The collectives of one nanobatch: the TP all-reduce of the layer's output, and with CP the
  // KV all-gather (forward) or the KV-gradient reduce-scatter (backward), fused before it.
  const double allreduce = tp > 1 ? 2.0 * (tp - 1) / tp * e * tokens * h : 0.0;
  const double kv_exchange = cp > 1 ? (cp - 1) * e * tokens * 2 * kv : 0.0;
  const auto comm = [&](bool attention, bool forward) {
    std::string name = tp > 1 ? "allreduce" : "";
    double bytes = allreduce;
    if (attention && cp > 1) {
      name = std::string(forward ? "kv-allgather" : "kv-reducescatter") + (tp > 1 ? "+" + name : "");
      bytes += kv_exchange;
    }
    return Collective{name, bytes};
  };
  const int count = 2 * w.layers_per_stage();
  const double norm_bytes = 5 * e * tokens * h;  // residual add and norm: read two, write, read, write
  const double rope_bytes = 2 * e * tokens * (a + kv);
  const double act_bytes = e * tokens * (ffn_in + ffn);

  std::vector<Partition> out;
  // Forward. A partition needs a collective to overlap: MLP has none under CP alone.
  const Collective attention_forward = comm(true, true), mlp_forward = comm(false, true);
  out.push_back({"attention-" + attention_forward.name, true,
                 {memory("add+norm", norm_bytes), linear("qkv", h, a + 2 * kv, 1.0), memory("rope", rope_bytes),
                  Kernel{"flash-attention", attention_flops, attention_bytes, true}, linear("out-proj", a, h, 1.0)},
                 attention_forward, count});
  if (tp > 1) {
    out.push_back({"mlp-" + mlp_forward.name, true,
                   {memory("add+norm", norm_bytes), linear("fc1", h, ffn_in, 1.0), memory("activation", act_bytes),
                    linear("fc2", ffn, h, 1.0)},
                   mlp_forward, count});
  }
  // Backward: data and weight gradients double the linear layers; FlashAttention's backward
  // recomputes the scores (2.5x the forward's FLOPs).
  const Collective attention_backward = comm(true, false), mlp_backward = comm(false, false);
  if (tp > 1) {
    out.push_back({"mlp-" + mlp_backward.name, false,
                   {linear("fc2-grad", ffn, h, 2.0), memory("activation-grad", 1.5 * act_bytes),
                    linear("fc1-grad", h, ffn_in, 2.0), memory("norm+add-grad", 1.4 * norm_bytes)},
                   mlp_backward, count});
  }
  out.push_back({"attention-" + attention_backward.name, false,
                 {linear("out-proj-grad", a, h, 2.0), Kernel{"flash-attention-grad", 2.5 * attention_flops, 2.0 * attention_bytes, true},
                  memory("rope-grad", rope_bytes), linear("qkv-grad", h, a + 2 * kv, 2.0),
                  memory("norm+add-grad", 1.4 * norm_bytes)},
                 attention_backward, count});
  return out;
}

}  // namespace perseus::kareus
