#include "perseus/planner/parallel_config.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
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

// Why a configuration cannot run at all (before memory), by kind: the error for a GPU count with
// no valid configuration counts them, and what each constraint would need.
enum class Invalid { kTensor, kLayers, kEvenSplit, kBatch, kInterleave, kTwoBW, kOther };

struct Invalidity {
  Invalid kind = Invalid::kOther;
  int value = 0;  // the degree or size at fault: t, p*v, d*b, p
  std::string why;
};

bool is_block(const LayerCost& layer) {
  return layer.kind == LayerKind::kTransformer || layer.kind == LayerKind::kCrossDecoder;
}

int batch_of(const ModelSpec& model, const SweepOptions& options) {
  return options.global_batch > 0 ? options.global_batch : model.default_global_batch;
}

// What the validity checks need of the model, counted once per sweep (model_layers is not free).
struct ModelCounts {
  int layers = 0;  // every layer: embedding, Transformer layers, head
  int blocks = 0;  // the Transformer layers Megatron-LM's split divides; 0 when the sweep balances by time
  int batch = 0;   // the global batch
};

ModelCounts count_model(const ModelSpec& model, const SweepOptions& options) {
  const std::vector<LayerCost> layers = model_layers(model, Workload{});
  ModelCounts counts;
  counts.layers = static_cast<int>(layers.size());
  if (options.megatron_layer_split) {
    counts.blocks = static_cast<int>(std::count_if(layers.begin(), layers.end(), is_block));
  }
  counts.batch = batch_of(model, options);
  return counts;
}

// The checks estimate_configuration makes before estimating (degrees already multiply to the GPUs).
// The only place the divisibility of layers, Transformer layers and batch is checked.
std::optional<Invalidity> invalidity(const ModelSpec& model, const ModelCounts& counts, const ParallelConfig& c) {
  const int layers = counts.layers, blocks = counts.blocks, batch = counts.batch;
  const int t = c.tensor, p = c.pipeline, d = c.data, b = c.microbatch_size;
  std::string why;
  if (!tensor_parallel_divides(model, t, &why)) return Invalidity{Invalid::kTensor, t, why};
  const bool interleaved = is_interleaved(c.schedule);
  const int v = interleaved ? c.chunks : 1;
  if (p * v > layers) {
    return Invalidity{Invalid::kLayers, p * v,
                      fmt::format("configuration: {} has {} layers, too few for {} pipeline stages", model.name, layers,
                                  p * v)};
  }
  if (blocks > 0 && blocks % (p * v) != 0) {
    return Invalidity{Invalid::kEvenSplit, p * v,
                      fmt::format("configuration: Megatron-LM's split needs p*v = {} to divide {}'s {} Transformer "
                                  "layers",
                                  p * v, model.name, blocks)};
  }
  if (batch % (d * b) != 0) {
    return Invalidity{Invalid::kBatch, d * b,
                      fmt::format("configuration: the global batch {} does not split into d*b = {}*{} microbatches",
                                  batch, d, b)};
  }
  const int m = batch / (d * b);
  if (interleaved && (v < 2 || p < 2 || m % p != 0)) {
    return Invalidity{Invalid::kInterleave, p,
                      fmt::format("configuration: interleaved 1F1B needs v >= 2, p >= 2 and m ({}) a multiple of p ({})",
                                  m, p)};
  }
  // 2BW is defined for m >= p (Narayanan et al., ICML'21): below m = p - 1 the two buffers no
  // longer hold the in-flight versions (memory_footprint, simulated_weight_versions).
  if (c.schedule == ScheduleKind::kPipeDream2BW && m < p) {
    const int versions = memory_footprint(ScheduleKind::kPipeDream2BW, p, m).front().weight_versions;
    return Invalidity{Invalid::kTwoBW, p,
                      fmt::format("configuration: PipeDream-2BW needs at least p = {} microbatches per weight update, "
                                  "got m = {}{}",
                                  p, m, versions > 2 ? fmt::format(" (stage 0 would need {} weight versions, not 2)", versions)
                                                     : "")};
  }
  return std::nullopt;
}

// Whether device `a` and device `b` of some pipeline sit on different nodes of `node` GPUs,
// pipeline ranks `stride` = t*d apart (Megatron-LM's order). O(min(stride, node)).
bool hop_crosses_nodes(int a, int b, int stride, int node) {
  if (a == b) return false;
  if (stride >= node) return true;
  const long long pa = static_cast<long long>(a) * stride, pb = static_cast<long long>(b) * stride;
  for (long long r0 = 0; r0 < stride; ++r0) {
    if ((r0 + pa) / node != (r0 + pb) / node) return true;
  }
  return false;
}

// Every configuration the sweep considers on `gpus` GPUs (fixed degrees honoured), in order.
template <typename Visit>
void for_each_candidate(int gpus, const SweepOptions& options, Visit visit) {
  for (int t : divisors(gpus)) {
    if (options.tensor > 0 && t != options.tensor) continue;
    for (int p : divisors(gpus / t)) {
      if (options.pipeline > 0 && p != options.pipeline) continue;
      const int d = gpus / (t * p);
      if (options.data > 0 && d != options.data) continue;
      for (int b : options.microbatch_sizes) {
        for (ScheduleKind schedule : options.schedules) {
          std::vector<int> chunk_options{1};
          if (is_interleaved(schedule)) chunk_options = options.interleave_chunks;
          for (int v : chunk_options) {
            for (bool recompute : options.recompute) {
              if (recomputes(schedule) && !recompute) continue;
              ParallelConfig c;
              c.tensor = t;
              c.pipeline = p;
              c.data = d;
              c.microbatch_size = b;
              c.chunks = v;
              c.recompute = recompute;
              c.sequence_parallel = options.sequence_parallel && t > 1;
              c.schedule = schedule;
              visit(c);
            }
          }
        }
      }
    }
  }
}

// The first configuration of `gpus` GPUs that passes the validity checks, if any.
std::optional<ParallelConfig> first_valid(const ModelSpec& model, const ModelCounts& counts, int gpus,
                                          const SweepOptions& options) {
  std::optional<ParallelConfig> found;
  for_each_candidate(gpus, options, [&](const ParallelConfig& c) {
    if (!found && !invalidity(model, counts, c)) found = c;
  });
  return found;
}

// A configuration to name for `gpus` GPUs known to have a valid one: the sweep's best, which
// fits if any does.
struct Example {
  std::string text;
  bool fits = false;
};
Example example_on(const ModelSpec& model, const ClusterSpec& cluster, int gpus, const SweepOptions& options) {
  ClusterSpec other = cluster;
  other.num_gpus = gpus;
  const ConfigEstimate best = sweep_configurations(model, other, options).front();
  return {best.fits ? describe(best.config)
                    : fmt::format("{}, which needs {:.1f} GiB per GPU", describe(best.config),
                                  best.memory.total_bytes / (1ull << 30)),
          best.fits};
}

std::string join_values(const std::set<int>& values) {
  std::string out;
  std::size_t shown = 0;
  for (int v : values) {
    if (shown++ == 8) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(v);
  }
  return out;
}

std::string fixed_degrees(const SweepOptions& options) {
  std::string out;
  for (auto [value, name] : {std::pair{options.tensor, "t"}, std::pair{options.pipeline, "p"},
                             std::pair{options.data, "d"}}) {
    if (value > 0) out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, value);
  }
  return out;
}

// Why no configuration of `model` on the cluster is valid, the most frequent reason first, and
// what would work: the degrees each constraint allows, a global batch near the requested one,
// the nearest GPU counts that have a valid configuration.
std::string no_valid_configuration(const ModelSpec& model, const ClusterSpec& cluster, const SweepOptions& options,
                                   const ModelCounts& model_counts,
                                   const std::map<Invalid, std::pair<std::size_t, std::set<int>>>& counts,
                                   const std::map<Invalid, std::string>& examples) {
  const int layers = model_counts.layers, batch = model_counts.batch, gpus = cluster.num_gpus;
  const std::string fixed = fixed_degrees(options);
  std::string message = fmt::format("no valid configuration of {} on {} GPUs{}", model.name, gpus,
                                    fixed.empty() ? "" : " with " + fixed);
  if (counts.empty()) {
    message += fmt::format(": the fixed degrees do not multiply to {} GPUs", gpus);
  }
  std::vector<std::pair<std::size_t, Invalid>> order;
  for (const auto& [kind, entry] : counts) order.emplace_back(entry.first, kind);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> reasons, works;
  for (const auto& [count, kind] : order) {
    const std::string values = join_values(counts.at(kind).second);
    const std::string n = fmt::format("{} configuration{}", count, count == 1 ? "" : "s");
    switch (kind) {
      case Invalid::kTensor: {
        reasons.push_back(fmt::format("{} with a tensor degree that does not split the layers (t = {}: {})", n, values,
                                      examples.at(kind)));
        std::set<int> fine;
        for (int t : divisors(gpus)) {
          if (tensor_parallel_divides(model, t, nullptr)) fine.insert(t);
        }
        works.push_back(fmt::format("t in {{{}}}", join_values(fine)));
        break;
      }
      case Invalid::kLayers:
        reasons.push_back(fmt::format("{} with more pipeline stages than {}'s {} layers (p*v = {})", n, model.name,
                                      layers, values));
        works.push_back(fmt::format("p*v <= {}", layers));
        break;
      case Invalid::kEvenSplit:
        reasons.push_back(fmt::format("{} whose p*v does not divide the Transformer layers (Megatron-LM's split: "
                                      "p*v = {})",
                                      n, values));
        works.push_back("p*v dividing the Transformer layers");
        break;
      case Invalid::kBatch:
        reasons.push_back(
            fmt::format("{} where d*b does not divide the global batch {} (d*b = {})", n, batch, values));
        works.push_back(fmt::format("d*b dividing {}", batch));
        break;
      case Invalid::kInterleave:
        reasons.push_back(fmt::format("{} of interleaved 1F1B where m is no multiple of p (p = {})", n, values));
        works.push_back("m a multiple of p for interleaving");
        break;
      case Invalid::kTwoBW:
        reasons.push_back(fmt::format("{} of PipeDream-2BW with fewer microbatches per update than stages (p = {})",
                                      n, values));
        works.push_back("m >= p for 2BW");
        break;
      case Invalid::kOther:
        reasons.push_back(fmt::format("{} ({})", n, examples.at(kind)));
        break;
    }
  }
  if (!reasons.empty()) message += ": " + fmt::format("{}", fmt::join(reasons, "; "));
  if (!works.empty()) message += fmt::format(". Valid configurations need {}", fmt::join(works, ", "));

  // A global batch near the requested one, on these GPUs. A suggestion whose best configuration
  // does not fit in memory is only "valid", never "would work".
  std::vector<std::string> suggestions, valid_only;
  auto suggest = [&](const std::string& change, const Example& example) {
    (example.fits ? suggestions : valid_only).push_back(fmt::format("{} ({})", change, example.text));
  };
  for (int k = 1; k <= batch; ++k) {
    std::optional<ParallelConfig> c;
    int other = 0;
    for (int candidate : {batch - k, batch + k}) {
      if (candidate < 1 || c) continue;
      ModelCounts changed = model_counts;
      changed.batch = candidate;
      c = first_valid(model, changed, gpus, options);
      other = candidate;
    }
    if (c) {
      SweepOptions changed = options;
      changed.global_batch = other;
      suggest(fmt::format("--global-batch {}", other), example_on(model, cluster, gpus, changed));
      break;
    }
  }
  // The nearest GPU counts with a valid configuration, with the fixed degrees, else without.
  for (const bool keep_fixed : {true, false}) {
    if (!keep_fixed && fixed.empty()) break;
    SweepOptions relaxed = options;
    if (!keep_fixed) relaxed.tensor = relaxed.pipeline = relaxed.data = 0;
    std::vector<std::pair<std::string, Example>> near;
    // Without the fixed degrees these very GPUs may do (k = 0); else the nearest counts either side.
    for (int k = keep_fixed ? 1 : 0; k <= gpus && near.empty(); ++k) {
      for (int candidate : std::set<int>{gpus - k, gpus + k}) {
        if (candidate < 1) continue;
        if (first_valid(model, model_counts, candidate, relaxed)) {
          near.emplace_back(fmt::format("{}{} GPUs", candidate == gpus ? "these " : "", candidate),
                            example_on(model, cluster, candidate, relaxed));
        }
      }
    }
    for (const auto& [change, example] : near) {
      suggest(keep_fixed ? change : fmt::format("without {}, {}", fixed, change), example);
    }
    if (!near.empty()) break;
  }
  if (!suggestions.empty()) message += fmt::format(". Would work: {}", fmt::join(suggestions, "; "));
  if (!valid_only.empty()) {
    message += fmt::format(". Valid, but too large for {} per GPU: {}", options.memory.usable_text(cluster.gpu->memory_bytes),
                           fmt::join(valid_only, "; "));
  }
  return message;
}

// Megatron-LM's split of `layers` into `stages` of equal Transformer layer counts; the layers
// before the first Transformer layer (the embedding) ride with the first stage and those after
// the last (the head) with the last. Precondition: the Transformer layers are contiguous and
// `stages` divides their count (invalidity's kEvenSplit). O(layers).
Partition megatron_partition(const std::vector<LayerCost>& layers, std::span<const double> weight, int stages) {
  const int n = static_cast<int>(layers.size());
  int first = 0, end = n;
  while (first < n && !is_block(layers[first])) ++first;
  while (end > first && !is_block(layers[end - 1])) --end;
  const int per_stage = (end - first) / stages;
  assert(per_stage >= 1 && per_stage * stages == end - first);
  std::vector<int> boundaries(stages + 1);
  for (int k = 1; k < stages; ++k) boundaries[k] = first + k * per_stage;
  boundaries[0] = 0;
  boundaries[stages] = n;
  return evaluate_partition(weight, std::move(boundaries));
}

}  // namespace

std::string pipeline_placement(const ConfigEstimate& e) {
  const int hops = e.config.pipeline - 1;
  if (hops == 0) return "none";
  if (e.pipeline_hops_across == 0) return "in node";
  if (e.pipeline_hops_across == hops) return "across nodes";
  return fmt::format("{} of {} hops across nodes", e.pipeline_hops_across, hops);
}

std::string MemoryModelOptions::usable_text(double gpu_bytes) const {
  constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;
  if (headroom <= 0.0) return fmt::format("{:.0f} GiB", gpu_bytes / kGiBytes);
  return fmt::format("{:.1f} GiB ({:.0f} GiB less {:g}% headroom)", usable_bytes(gpu_bytes) / kGiBytes,
                     gpu_bytes / kGiBytes, 100.0 * headroom);
}

std::string describe(const ParallelConfig& c) {
  std::string out = fmt::format("t={} p={} d={} b={} m={} {}", c.tensor, c.pipeline, c.data, c.microbatch_size,
                                c.microbatches, to_string(c.schedule));
  if (is_interleaved(c.schedule)) out += fmt::format(" v={}", c.chunks);
  if (c.recompute && !recomputes(c.schedule)) out += " recompute";  // else the name says it
  if (c.sequence_parallel) out += " sp";
  return out;
}

namespace {

// estimate_configuration with the model's counts given (a sweep counts them once).
ConfigEstimate estimate_counted(const ModelSpec& model, const ClusterSpec& cluster, const ParallelConfig& in,
                                const SweepOptions& options, const ModelCounts& counts) {
  if (!cluster.gpu) throw InputError("configuration: no GPU given");
  const GpuSpec& gpu = *cluster.gpu;
  ParallelConfig config = in;
  const int t = config.tensor, p = config.pipeline, d = config.data, b = config.microbatch_size;
  if (t < 1 || p < 1 || d < 1 || b < 1) throw InputError("configuration: degrees and microbatch size must be >= 1");
  if (static_cast<long long>(t) * p * d != cluster.num_gpus) {
    throw InputError(fmt::format("configuration: t*p*d = {}*{}*{} = {} does not match the {} GPUs", t, p, d,
                                 static_cast<long long>(t) * p * d, cluster.num_gpus));
  }
  const int batch = counts.batch;
  if (const auto invalid = invalidity(model, counts, config)) throw InputError(invalid->why);
  const int m = batch / (d * b);
  config.microbatches = m;
  const bool interleaved = is_interleaved(config.schedule);
  const int v = interleaved ? config.chunks : 1;
  config.chunks = v;
  // Recomputation is a flag of every schedule (the asynchronous ones too); 1f1b-recompute and
  // interleaved-1f1b-recompute are 1F1B and interleaved 1F1B with it, the kinds whose DAGs
  // hold the recomputations.
  if (recomputes(config.schedule)) config.recompute = true;
  if (config.recompute && config.schedule == ScheduleKind::k1F1B) config.schedule = ScheduleKind::k1F1BEarlyRecompute;
  if (config.recompute && config.schedule == ScheduleKind::kInterleaved1F1B) {
    config.schedule = ScheduleKind::kInterleaved1F1BRecompute;
  }

  const Workload workload{b, t, 0, config.sequence_parallel, false};
  const std::vector<LayerCost> layers = model_layers(model, workload);
  const int n = static_cast<int>(layers.size());
  const int virtual_stages = p * v;
  const int node = cluster.nodes_gpus_per_node();
  const EnergyModel energy(gpu, options.params ? *options.params : planning_params(gpu, options.time_model));
  const bool tensor_within_node = tensor_group_within_node(t, node);
  const double tp_bw = (tensor_within_node ? gpu.intra_node_busbw : cluster.network_bandwidth()) *
                       energy.params().collective_scale;

  std::vector<double> forward(n), backward(n), weight(n);
  for (int l = 0; l < n; ++l) {
    const std::span<const LayerCost> one(&layers[l], 1);
    forward[l] = energy.time_at_max(operation_work(one, InstructionKind::kForward), InstructionKind::kForward, tp_bw);
    backward[l] = energy.time_at_max(operation_work(one, InstructionKind::kBackward), InstructionKind::kBackward, tp_bw);
    // Recomputation runs the checkpointed layers' forward again (not the embedding or the head).
    if (config.recompute && layers[l].recomputed) backward[l] += forward[l];
    weight[l] = forward[l] + backward[l];
  }
  const Partition partition = options.megatron_layer_split ? megatron_partition(layers, weight, virtual_stages)
                                                            : min_max_partition(weight, virtual_stages);

  ConfigEstimate e;
  e.boundaries = partition.boundaries;
  e.imbalance_ratio = partition.imbalance_ratio;
  e.tensor_within_node = tensor_within_node;
  std::vector<double> hop_bandwidth(p);  // from device dev to (dev + 1) % p
  for (int dev = 0; dev < p; ++dev) {
    const bool crosses = hop_crosses_nodes(dev, (dev + 1) % p, t * d, node);
    hop_bandwidth[dev] = crosses ? cluster.network_bandwidth() : gpu.p2p_bandwidth;
    if (crosses && dev + 1 < p) ++e.pipeline_hops_across;
  }
  e.pipeline_across_nodes = e.pipeline_hops_across > 0;

  const std::vector<StageFootprint> footprint = memory_footprint(config.schedule, p, m, v);
  const MemoryModelOptions& mem = options.memory;
  double worst_device = 0.0;
  double worst_params = 0.0;
  for (int dev = 0; dev < p; ++dev) {
    double f = 0.0, bw = 0.0, params = 0.0, activations = 0.0, checkpoints = 0.0, largest_layer = 0.0;
    double chunk_activation_max = 0.0, chunk_checkpoint_max = 0.0, tensor_bytes = 0.0, sent = 0.0, p2p = 0.0;
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
        const double bytes = layers[partition.boundaries[vs + 1] - 1].output_bytes / t;
        sent += bytes;
        p2p += bytes / hop_bandwidth[dev];
      }
    }
    if (holds_embedding) params -= tied_copy;  // the head's copy is the embedding itself
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
    me.capacity_bytes = mem.usable_bytes(gpu.memory_bytes);
    if (me.total_bytes > worst_device) {
      worst_device = me.total_bytes;
      e.memory = me;
    }
    worst_params = std::max(worst_params, params);
  }
  e.fits = e.memory.total_bytes <= e.memory.capacity_bytes;
  if (!e.fits) {
    e.rejected = fmt::format("stage {} needs {:.1f} GiB of the {} per GPU", e.memory.stage,
                             e.memory.total_bytes / (1ull << 30), mem.usable_text(gpu.memory_bytes));
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

}  // namespace

ConfigEstimate estimate_configuration(const ModelSpec& model, const ClusterSpec& cluster, const ParallelConfig& in,
                                      const SweepOptions& options) {
  return estimate_counted(model, cluster, in, options, count_model(model, options));
}

std::vector<ConfigEstimate> sweep_configurations(const ModelSpec& model, const ClusterSpec& cluster,
                                                 const SweepOptions& options) {
  if (cluster.num_gpus < 1) throw InputError("configuration: the GPU count must be at least 1");
  const ModelCounts counts = count_model(model, options);
  std::vector<ConfigEstimate> out;
  std::map<Invalid, std::pair<std::size_t, std::set<int>>> rejected;  // kind -> configurations, values at fault
  std::map<Invalid, std::string> examples;
  auto reject = [&](Invalid kind, int value, const std::string& why) {
    auto& [count, values] = rejected[kind];
    ++count;
    values.insert(value);
    examples.emplace(kind, why);
  };
  for_each_candidate(cluster.num_gpus, options, [&](const ParallelConfig& c) {
    if (const auto invalid = invalidity(model, counts, c)) return reject(invalid->kind, invalid->value, invalid->why);
    try {
      out.push_back(estimate_counted(model, cluster, c, options, counts));
    } catch (const InputError& error) {
      reject(Invalid::kOther, 0, error.what());
    }
  });
  if (out.empty()) throw InputError(no_valid_configuration(model, cluster, options, counts, rejected, examples));
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
