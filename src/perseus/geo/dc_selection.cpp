#include "perseus/geo/dc_selection.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace perseus::geo {

DcSelection select_dcs(const Workload& workload, const NetworkSpec& network, const DcSelectionOptions& options) {
  validate(network);
  const int C = options.cell_size, P = workload.num_stages(), M = workload.spec.microbatches;
  if (C < 1) throw InputError(fmt::format("--cell-size must be at least 1, got {}", C));
  if (options.max_cells < 0) throw InputError(fmt::format("--max-cells must be positive, got {}", options.max_cells));
  const int total = network.total_gpus();
  const int max_cells = options.max_cells > 0 ? options.max_cells : std::max(1, total / (C * P));

  std::vector<std::size_t> order(network.dcs.size());
  std::iota(order.begin(), order.end(), 0);
  if (!options.keep_order)
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return network.dcs[a].gpus > network.dcs[b].gpus; });

  DcSelection out;
  // Pipeline time of one DP-cell of `members` pipelines with `split` stages per DC (in order).
  std::map<std::pair<std::vector<int>, int>, double> pipeline_time;
  auto cell_time = [&](const NetworkSpec& ordered, const std::vector<int>& split, int members) {
    auto [it, fresh] = pipeline_time.try_emplace({split, members}, 0.0);
    if (fresh) {
      ++out.distinct_emulations;
      std::vector<int> compact;  // the DCs that hold stages, in order (a DC with none is skipped)
      NetworkSpec used = ordered;
      used.dcs.clear();
      for (std::size_t i = 0; i < split.size(); ++i)
        if (split[i] > 0) used.dcs.push_back(ordered.dcs[i]), compact.push_back(split[i]);
      const Placement cell = place_by_partitions(used, compact, members, members);
      EmulationOptions emulation;
      emulation.scheduler = Scheduler::kAtlas;
      emulation.sharing = options.sharing;
      it->second = emulate(workload, used, cell, emulation).pipeline_time_s;
    }
    return it->second;
  };
  double largest_stage = 0.0;
  for (const StageWork& s : workload.stages) largest_stage = std::max(largest_stage, s.parameters);
  const int max_pipelines = options.partial_cells ? max_cells * C + C - 1 : max_cells * C;
  const int step = options.partial_cells ? 1 : C;
  for (int N = step; N <= max_pipelines; N += step) {
    DcChoice choice;
    choice.pipelines = N;
    choice.cells = (N + C - 1) / C;
    choice.stages_per_dc.assign(network.dcs.size(), 0);
    int left = P;
    for (std::size_t dc : order) {
      const int assigned = std::min(left, network.dcs[dc].gpus / N);
      choice.stages_per_dc[dc] = assigned;
      left -= assigned;
      if (left == 0) break;
    }
    choice.feasible = left == 0;
    if (choice.feasible) {
      // The pipeline visits the DCs in the algorithm's order; stages_per_dc is in the network's.
      NetworkSpec ordered = network;
      std::vector<int> split;
      for (std::size_t i = 0; i < order.size(); ++i) {
        ordered.dcs[i] = network.dcs[order[i]];
        split.push_back(choice.stages_per_dc[order[i]]);
      }
      while (!split.empty() && split.back() == 0) split.pop_back();
      choice.pipeline_time_s = cell_time(ordered, split, std::min(N, C));
      if (N > C && N % C != 0)  // a last, smaller cell
        choice.pipeline_time_s = std::max(choice.pipeline_time_s, cell_time(ordered, split, N % C));
      choice.allreduce_s = ring_allreduce_s(largest_stage, N, network.intra_dc_gbps * 1e9 / 8.0);
      choice.total_s = choice.pipeline_time_s + choice.allreduce_s;
      choice.throughput = static_cast<double>(N) * M / choice.total_s;
      for (std::size_t dc = 0; dc < network.dcs.size(); ++dc) {
        choice.gpus_used_per_dc.push_back(choice.stages_per_dc[dc] * N);
        choice.gpus_used += choice.gpus_used_per_dc.back();
      }
      // Highest throughput; among equals (0.1%), the fewest GPUs.
      if (out.best < 0 || choice.throughput > out.choices[out.best].throughput * 1.001)
        out.best = static_cast<int>(out.choices.size());
    } else {
      choice.gpus_used_per_dc.assign(network.dcs.size(), 0);
    }
    out.choices.push_back(std::move(choice));
    if (options.progress) options.progress(N / step, max_pipelines / step);
  }
  return out;
}

}  // namespace perseus::geo
