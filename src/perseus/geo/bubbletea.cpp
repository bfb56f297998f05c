#include "perseus/geo/bubbletea.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "perseus/model/statistics.hpp"

namespace perseus::geo {

namespace {

// Free slots of one GPU over the whole stream, sorted and disjoint; booking splits them.
class FreeSlots {
 public:
  void add(Interval slot) { slots_.push_back(slot); }
  void sort() {
    std::sort(slots_.begin(), slots_.end(), [](const Interval& a, const Interval& b) { return a.start_s < b.start_s; });
  }
  // The earliest start >= t of `d` seconds inside one slot; infinity when none.
  double earliest(double t, double d) const {
    auto it = std::lower_bound(slots_.begin(), slots_.end(), t, [](const Interval& s, double v) { return s.end_s < v; });
    for (; it != slots_.end(); ++it) {
      const double start = std::max(t, it->start_s);
      if (start + d <= it->end_s) return start;
    }
    return std::numeric_limits<double>::infinity();
  }
  void book(double start, double d) {
    auto it = std::find_if(slots_.begin(), slots_.end(),
                           [&](const Interval& s) { return s.start_s <= start && start + d <= s.end_s + 1e-12; });
    const Interval slot = *it;
    it = slots_.erase(it);
    if (start + d < slot.end_s) it = slots_.insert(it, {start + d, slot.end_s});
    if (slot.start_s < start) slots_.insert(it, {slot.start_s, start});
  }

 private:
  std::vector<Interval> slots_;
};

}  // namespace

BubbleTeaResult fill_bubbles(const GeoEmulation& training, const NetworkSpec& network,
                             const BubbleTeaSpec& spec) {
  const planner::ModelSpec& model = planner::find_model(spec.inference_model);
  if (!(spec.arrival_rate > 0.0)) throw InputError(fmt::format("--rate must be positive, got {}", spec.arrival_rate));
  if (spec.min_tokens < 1 || spec.max_tokens < spec.min_tokens)
    throw InputError(fmt::format("--tokens {}:{}: need 1 <= min <= max", spec.min_tokens, spec.max_tokens));
  if (!(spec.guard_s >= 0.0)) throw InputError(fmt::format("--guard-ms must be zero or more, got {}", spec.guard_s * 1e3));
  if (!(spec.max_wait_s >= 0.0)) throw InputError(fmt::format("--max-wait-ms must be zero or more, got {}", spec.max_wait_s * 1e3));
  if (spec.iterations < 1) throw InputError(fmt::format("--iterations must be at least 1, got {}", spec.iterations));
  if (!(spec.reference_s > 0.0) || spec.reference_tokens < 1) throw InputError("the prefill reference time and tokens must be positive");
  const Placement& pl = training.placement;
  const int layers = model.transformer.layers;
  const int K = spec.inference_stages > 0 ? spec.inference_stages : pl.num_cells();
  if (K > layers)
    throw InputError(fmt::format("--inference-stages {}: {} has only {} layers", K, model.name, layers));
  if (spec.inference_stages < 0) throw InputError("--inference-stages must be positive");

  BubbleTeaResult out;
  out.spec = spec;
  out.inference_stages = K;
  const double T = training.iteration_time_s;
  out.horizon_s = spec.iterations * T;

  // Inference pipelines: GPUs of one DC with the same (stage, rank in the cell), K at a time by cell.
  std::map<std::tuple<int, int, int>, std::vector<int>> groups;
  for (int p = 0; p < pl.pipelines; ++p)
    for (int s = 0; s < pl.stages; ++s) groups[{s, pl.dc_of(p, s), p % pl.cell_size}].push_back(pl.gpu(p, s));
  std::vector<std::vector<int>> pipelines;
  for (auto& [key, gpus] : groups)
    for (std::size_t i = 0; i < gpus.size(); i += static_cast<std::size_t>(K))
      pipelines.emplace_back(gpus.begin() + static_cast<std::ptrdiff_t>(i),
                             gpus.begin() + static_cast<std::ptrdiff_t>(std::min(gpus.size(), i + K)));
  out.inference_pipelines = static_cast<int>(pipelines.size());

  // Free slots over the stream: each bubble, less the guard before the next computation.
  const auto idle = bubbles(training, spec.guard_s);
  std::vector<FreeSlots> free(static_cast<std::size_t>(pl.num_gpus()));
  for (int g = 0; g < pl.num_gpus(); ++g) {
    for (int k = 0; k < spec.iterations; ++k)
      for (const Interval& b : idle[g]) free[g].add({b.start_s + k * T, b.end_s - spec.guard_s + k * T});
    free[g].sort();
  }

  const auto& t = model.transformer;
  const double bandwidth = network.intra_dc_gbps * 1e9 / 8.0;
  auto compute_s = [&](int tokens, int gpu_layers) {
    return spec.reference_s * tokens / spec.reference_tokens * gpu_layers / layers;
  };
  auto hop_s = [&](int tokens) { return 2.0 * tokens * t.hidden / bandwidth; };
  auto handoff_s = [&](int tokens) { return 2.0 * layers * 2.0 * t.kv_width() * tokens / bandwidth; };
  out.hop_overhead_s = (K - 1) * hop_s(spec.reference_tokens);
  {
    planner::Workload one;
    one.seq_len = spec.reference_tokens;
    double parameters = 0.0;
    for (const auto& layer : planner::model_layers(model, one)) parameters += layer.unique_parameters;
    out.inference_parameters = parameters;
    out.inference_memory_bytes =
        2.0 * parameters / K + 2.0 * 2.0 * t.kv_width() * spec.reference_tokens * std::ceil(double(layers) / K);
  }

  std::mt19937_64 rng(spec.seed);
  std::exponential_distribution<double> gap(spec.arrival_rate);
  std::uniform_int_distribution<int> tokens_of(spec.min_tokens, spec.max_tokens);
  out.held.resize(static_cast<std::size_t>(pl.num_gpus()));
  std::vector<double> ttft, added;
  double prefill_busy = 0.0;
  for (double arrival = gap(rng); arrival < out.horizon_s; arrival += gap(rng)) {
    PrefillRequest request;
    request.id = static_cast<int>(out.requests.size());
    request.arrival_s = arrival;
    request.tokens = tokens_of(rng);
    double best_end = std::numeric_limits<double>::infinity();
    std::vector<PrefillPart> best_parts;
    for (std::size_t q = 0; q < pipelines.size(); ++q) {
      const std::vector<int>& gpus = pipelines[q];
      const int k = static_cast<int>(gpus.size());
      std::vector<PrefillPart> parts;
      double ready = arrival;
      for (int i = 0; i < k; ++i) {
        const int gpu_layers = layers / k + (i < layers % k ? 1 : 0);
        const double d = compute_s(request.tokens, gpu_layers);
        const double start = free[gpus[i]].earliest(ready, d);
        if (i == 0 && start - arrival > spec.max_wait_s) ready = std::numeric_limits<double>::infinity();
        if (!std::isfinite(start) || !std::isfinite(ready)) {
          ready = std::numeric_limits<double>::infinity();
          break;
        }
        parts.push_back({gpus[i], start, start + d});
        ready = start + d + (i + 1 < k ? hop_s(request.tokens) : 0.0);
      }
      if (ready < best_end) best_end = ready, best_parts = parts, request.pipeline = static_cast<int>(q);
    }
    if (std::isfinite(best_end) && best_end <= out.horizon_s) {
      request.served = true;
      request.parts = best_parts;
      for (const PrefillPart& part : best_parts) {
        free[part.gpu].book(part.start_s, part.end_s - part.start_s);
        prefill_busy += part.end_s - part.start_s;
        const double offset = std::floor(part.start_s / T) * T;
        out.held[part.gpu].push_back({part.start_s - offset, part.end_s - offset});
      }
      request.first_token_s = best_end + handoff_s(request.tokens);
      request.ttft_s = request.first_token_s - arrival;
      request.added_s = request.ttft_s - compute_s(request.tokens, layers);
      ttft.push_back(request.ttft_s);
      added.push_back(request.added_s);
      ++out.served;
    } else {
      request.pipeline = -1;
      ++out.declined;
    }
    out.requests.push_back(std::move(request));
  }
  const double gpu_time = out.horizon_s * pl.num_gpus();
  out.training_utilization = training.utilization();
  out.utilization = gpu_time > 0.0 ? (training.busy_s * spec.iterations + prefill_busy) / gpu_time : 0.0;
  out.median_ttft_s = median(ttft);
  out.median_added_s = median(added);
  if (!ttft.empty()) {
    std::sort(ttft.begin(), ttft.end());
    out.p99_ttft_s = ttft[std::min(ttft.size() - 1, static_cast<std::size_t>(std::ceil(0.99 * ttft.size())) - 1)];
  }
  for (auto& list : out.held)
    std::sort(list.begin(), list.end(), [](const Interval& a, const Interval& b) { return a.start_s < b.start_s; });
  return out;
}

}  // namespace perseus::geo
