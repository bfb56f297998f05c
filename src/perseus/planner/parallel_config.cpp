#include "perseus/planner/parallel_config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "perseus/model/instruction.hpp"
#include "perseus/planner/partition.hpp"

namespace perseus::planner {
namespace {

double ring_allreduce(double bytes, int n) { return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0; }

// Time of an all-reduce of `bytes` over `members` GPUs whose group has one member every `stride`
// ranks. Inside a node it runs at the node's bus bandwidth; across nodes hierarchically (NCCL):
// reduce-scatter inside the node, a ring across nodes on 1/k of the data per GPU (k members per
// node, each with its own NIC), all-gather inside the node.
double allreduce_time(double bytes, int members, int stride, int node, double intra_busbw, double network) {
  if (members <= 1) return 0.0;
  if (static_cast<long long>(members) * stride <= node) return ring_allreduce(bytes, members) / intra_busbw;
  const int per_node = std::max(1, std::min(members, node / std::max(1, std::min(stride, node))));
  const int nodes = (members + per_node - 1) / per_node;
  return ring_allreduce(bytes, per_node) / intra_busbw + ring_allreduce(bytes / per_node, nodes) / network;
}

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k) {
    if (n % k == 0) out.push_back(k);
  }
  return out;
}

}  // namespace

std::string describe(const ParallelConfig& c) {
  std::string out = fmt::format("t={} p={} d={} b={} m={} {}", c.tensor, c.pipeline, c.data, c.microbatch_size,
                                c.microbatches, to_string(c.schedule));
  if (c.schedule == PipelineSchedule::kInterleaved1F1B) out += fmt::format(" v={}", c.chunks);
  if (c.recompute) out += " recompute";
  if (c.sequence_parallel) out += " sp";
  return out;
}

ConfigEstimate estimate_configuration(const ModelSpec& model, const ClusterSpec& cluster, const ParallelConfig& in,
                                      const SweepOptions& options) {
  if (!cluster.gpu) throw InputError("configuration: no GPU given");
  const GpuSpec& gpu = *cluster.gpu;
  ParallelConfig config = in;
  const int t = config.tensor, p = config.pipeline, d = config.data, b = config.microbatch_size;
  if (t < 1 || p < 1 || d < 1 || b < 1) throw InputError("configuration: degrees and microbatch size must be >= 1");
  if (static_cast<long long>(t) * p * d != cluster.num_gpus) {
    throw InputError(fmt::format("configuration: t*p*d = {}*{}*{} = {} does not match the {} GPUs", t, p, d,
                                 static_cast<long long>(t) * p * d, cluster.num_gpus));
  }
  const int batch = options.global_batch > 0 ? options.global_batch : model.default_global_batch;
  if (batch % (d * b) != 0) {
    throw InputError(fmt::format("configuration: the global batch {} does not split into d*b = {}*{} microbatches",
                                 batch, d, b));
  }
  const int m = batch / (d * b);
  config.microbatches = m;
  const bool interleaved = config.schedule == PipelineSchedule::kInterleaved1F1B;
  const int v = interleaved ? config.chunks : 1;
  config.chunks = v;
  if (interleaved && (v < 2 || p < 2 || m % p != 0)) {
    throw InputError(fmt::format("configuration: interleaved 1F1B needs v >= 2, p >= 2 and m ({}) a multiple of p ({})",
                                 m, p));
  }
  // Recomputation is a flag of the synchronous schedules; 1f1b-recompute is 1F1B with it.
  if (config.schedule == PipelineSchedule::k1F1BRecompute) config.recompute = true;
  if (config.recompute && config.schedule == PipelineSchedule::k1F1B) config.schedule = PipelineSchedule::k1F1BRecompute;

  const Workload workload{b, t, 0, config.sequence_parallel, false};
  const std::vector<LayerCost> layers = model_layers(model, workload);
  const int n = static_cast<int>(layers.size());
  const int virtual_stages = p * v;
  if (virtual_stages > n) {
    throw InputError(fmt::format("configuration: {} has {} layers, too few for {} pipeline stages", model.name, n,
                                 virtual_stages));
  }
  const int node = cluster.nodes_gpus_per_node();
  const EnergyModel energy(gpu, gpu.energy);
  const double tp_bw = (t <= node ? gpu.intra_node_busbw : cluster.network_bandwidth()) * gpu.energy.collective_scale;

  std::vector<double> forward(n), backward(n), weight(n);
  for (int l = 0; l < n; ++l) {
    const std::span<const LayerCost> one(&layers[l], 1);
    forward[l] = energy.time_at_max(operation_work(one, InstructionKind::kForward), InstructionKind::kForward, tp_bw);
    backward[l] = energy.time_at_max(operation_work(one, InstructionKind::kBackward), InstructionKind::kBackward, tp_bw);
    if (config.recompute) backward[l] += forward[l];
    weight[l] = forward[l] + backward[l];
  }
  const Partition partition = min_max_partition(weight, virtual_stages);

  ConfigEstimate e;
  e.boundaries = partition.boundaries;
  e.imbalance_ratio = partition.imbalance_ratio;
  e.tensor_within_node = t <= node;
  e.pipeline_across_nodes = p > 1 && t * d >= node;
  const double p2p_bw = e.pipeline_across_nodes ? cluster.network_bandwidth() : gpu.p2p_bandwidth;

  const std::vector<StageFootprint> footprint = memory_footprint(config.schedule, p, m, v);
  const MemoryModelOptions& mem = options.memory;
  double worst_device = 0.0;
  double worst_params = 0.0;
  for (int dev = 0; dev < p; ++dev) {
    double f = 0.0, bw = 0.0, params = 0.0, activations = 0.0, checkpoints = 0.0, largest_layer = 0.0;
    double chunk_activation_max = 0.0, chunk_checkpoint_max = 0.0, tensor_bytes = 0.0, sent = 0.0;
    bool holds_embedding = false;
    double tied_copy = 0.0;
    for (int c = 0; c < v; ++c) {
      const int vs = c * p + dev;
      double chunk_activation = 0.0, chunk_checkpoint = 0.0;
      for (int l = partition.boundaries[vs]; l < partition.boundaries[vs + 1]; ++l) {
        f += forward[l];
        bw += backward[l];
        params += layers[l].parameters;
        holds_embedding |= l == 0 && layers[l].kind == LayerKind::kEmbedding;
        tied_copy += layers[l].tied_copy_parameters;
        chunk_activation += layers[l].activation_bytes;
        chunk_checkpoint += layers[l].checkpoint_bytes;
        largest_layer = std::max(largest_layer, layers[l].activation_bytes);
        tensor_bytes += layers[l].tp_comm_bytes;
      }
      activations += chunk_activation;
      checkpoints += chunk_checkpoint;
      chunk_activation_max = std::max(chunk_activation_max, chunk_activation);
      chunk_checkpoint_max = std::max(chunk_checkpoint_max, chunk_checkpoint);
      if (vs + 1 < virtual_stages) {
        // Megatron's scatter/gather: each tensor-parallel rank sends 1/t of the activation.
        sent += layers[partition.boundaries[vs + 1] - 1].output_bytes / t;
      }
    }
    if (holds_embedding) params -= tied_copy;  // the head's copy is the embedding itself
    const double p2p = sent / p2p_bw;
    e.p2p_s = std::max(e.p2p_s, p2p / v);
    f += p2p;
    bw += p2p;
    if (f + bw > e.stage_forward_s + e.stage_backward_s) {
      e.stage_forward_s = f;
      e.stage_backward_s = bw;
    }
    e.tensor_bytes = std::max(e.tensor_bytes, tensor_bytes * m * (config.recompute ? 3.0 : 2.0));
    e.pipeline_bytes = std::max(e.pipeline_bytes, 2.0 * m * sent);

    const StageFootprint& fp = footprint[dev];
    MemoryEstimate me;
    me.stage = dev;
    me.weight_versions = fp.weight_versions;
    me.activation_stashes = fp.activation_stashes;
    me.weights_bytes = mem.weight_bytes * params * fp.weight_versions;
    me.gradients_bytes = mem.gradient_bytes * params;
    me.optimizer_bytes = mem.optimizer_bytes * params;
    const double per_stash = v > 1 ? chunk_activation_max : activations;
    const double per_checkpoint = v > 1 ? chunk_checkpoint_max : checkpoints;
    if (config.recompute) {
      // Layer inputs of every stashed microbatch, plus one layer recomputed at a time.
      me.activations_bytes = fp.activation_stashes * per_checkpoint + largest_layer;
    } else {
      me.activations_bytes = fp.activation_stashes * per_stash;
    }
    me.workspace_bytes = mem.workspace_bytes;
    me.total_bytes = me.weights_bytes + me.gradients_bytes + me.optimizer_bytes + me.activations_bytes +
                     me.workspace_bytes;
    me.capacity_bytes = gpu.memory_bytes;
    if (me.total_bytes > worst_device) {
      worst_device = me.total_bytes;
      e.memory = me;
    }
    worst_params = std::max(worst_params, params);
  }
  e.fits = e.memory.total_bytes <= gpu.memory_bytes;
  if (!e.fits) {
    e.rejected = fmt::format("stage {} needs {:.1f} GiB of the {:.0f} GiB per GPU", e.memory.stage,
                             e.memory.total_bytes / (1ull << 30), gpu.memory_bytes / (1ull << 30));
  }

  const double per_microbatch = e.stage_forward_s + e.stage_backward_s;
  e.pipeline_s = flushes(config.schedule) ? (m + (p - 1.0) / v) * per_microbatch : m * per_microbatch;
  e.bubble_fraction = bubble_fraction(config.schedule, p, m, v);
  e.data_bytes = ring_allreduce(mem.gradient_bytes * worst_params, d);
  e.data_parallel_s = allreduce_time(mem.gradient_bytes * worst_params, d, t, node, gpu.intra_node_busbw,
                                     cluster.network_bandwidth());
  e.iteration_time_s = e.pipeline_s + e.data_parallel_s;
  e.samples_per_second = batch / e.iteration_time_s;
  double model_flops = 0.0;
  for (const LayerCost& layer : layers) model_flops += 3.0 * layer.forward_flops * t;
  model_flops *= static_cast<double>(batch) / b;
  e.model_flops_utilization = model_flops / (cluster.num_gpus * gpu.peak_flops * e.iteration_time_s);
  e.config = config;
  return e;
}

std::vector<ConfigEstimate> sweep_configurations(const ModelSpec& model, const ClusterSpec& cluster,
                                                 const SweepOptions& options) {
  if (cluster.num_gpus < 1) throw InputError("configuration: the GPU count must be at least 1");
  std::vector<ConfigEstimate> out;
  std::string last_reason;
  for (int t : divisors(cluster.num_gpus)) {
    if (options.tensor > 0 && t != options.tensor) continue;
    std::string why;
    if (!tensor_parallel_divides(model, t, &why)) {
      last_reason = why;
      continue;
    }
    for (int p : divisors(cluster.num_gpus / t)) {
      if (options.pipeline > 0 && p != options.pipeline) continue;
      const int d = cluster.num_gpus / (t * p);
      if (options.data > 0 && d != options.data) continue;
      for (int b : options.microbatch_sizes) {
        for (PipelineSchedule schedule : options.schedules) {
          std::vector<int> chunk_options{1};
          if (schedule == PipelineSchedule::kInterleaved1F1B) chunk_options = options.interleave_chunks;
          for (int v : chunk_options) {
            for (bool recompute : options.recompute) {
              if (recompute && !flushes(schedule)) continue;
              ParallelConfig c;
              c.tensor = t;
              c.pipeline = p;
              c.data = d;
              c.microbatch_size = b;
              c.chunks = v;
              c.recompute = recompute;
              c.sequence_parallel = options.sequence_parallel && t > 1;
              c.schedule = schedule;
              if (schedule == PipelineSchedule::k1F1BRecompute && !recompute) continue;
              try {
                out.push_back(estimate_configuration(model, cluster, c, options));
              } catch (const InputError& error) {
                last_reason = error.what();
              }
            }
          }
        }
      }
    }
  }
  if (out.empty()) {
    throw InputError(fmt::format("no valid configuration of {} on {} GPUs{}", model.name, cluster.num_gpus,
                                 last_reason.empty() ? "" : " (e.g. " + last_reason + ")"));
  }
  std::stable_sort(out.begin(), out.end(), [](const ConfigEstimate& a, const ConfigEstimate& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return a.memory.total_bytes < b.memory.total_bytes;
    if (a.iteration_time_s != b.iteration_time_s) return a.iteration_time_s < b.iteration_time_s;
    const int mp_a = a.config.tensor * a.config.pipeline, mp_b = b.config.tensor * b.config.pipeline;
    if (mp_a != mp_b) return mp_a < mp_b;
    return a.config.tensor < b.config.tensor;
  });
  return out;
}

}  // namespace perseus::planner
