#include "perseus/geo/placement.hpp"

#include <fmt/format.h>

namespace perseus::geo {

Placement place_stage_major(const NetworkSpec& network, int stages, int pipelines, int cell_size) {
  validate(network);
  const int total = network.total_gpus();
  if (stages < 1) throw InputError(fmt::format("--stages must be at least 1, got {}", stages));
  if (stages > total) throw InputError(fmt::format("--stages {}: more stages than the {} GPUs of every DC together", stages, total));
  if (cell_size < 1) throw InputError(fmt::format("--cell-size must be at least 1, got {}", cell_size));
  if (pipelines < 0) throw InputError(fmt::format("--pipelines must be positive, got {}", pipelines));
  if (pipelines == 0) pipelines = total / stages;
  if (pipelines * stages > total)
    throw InputError(fmt::format("{} pipelines of {} stages need {} GPUs; the DCs have {}", pipelines, stages,
                                 pipelines * stages, total));
  Placement p;
  p.pipelines = pipelines, p.stages = stages, p.cell_size = cell_size;
  p.dc.assign(static_cast<std::size_t>(pipelines) * stages, 0);
  p.used_per_dc.assign(network.dcs.size(), 0);
  std::size_t dc = 0;
  for (int s = 0; s < stages; ++s)
    for (int q = 0; q < pipelines; ++q) {
      while (p.used_per_dc[dc] == network.dcs[dc].gpus) ++dc;
      p.dc[static_cast<std::size_t>(p.gpu(q, s))] = static_cast<int>(dc);
      ++p.used_per_dc[dc];
    }
  return p;
}

Placement place_by_partitions(const NetworkSpec& network, const std::vector<int>& stages_per_dc, int pipelines,
                              int cell_size) {
  validate(network);
  if (stages_per_dc.size() > network.dcs.size())
    throw InputError(fmt::format("{} partitions for {} DCs", stages_per_dc.size(), network.dcs.size()));
  if (pipelines < 1 || cell_size < 1) throw InputError("pipelines and the cell size must be at least 1");
  Placement p;
  p.pipelines = pipelines, p.cell_size = cell_size, p.stages = 0;
  for (int n : stages_per_dc) p.stages += n;
  if (p.stages < 1) throw InputError("no stage placed in any DC");
  p.dc.resize(static_cast<std::size_t>(pipelines) * p.stages);
  p.used_per_dc.assign(network.dcs.size(), 0);
  int stage = 0;
  for (std::size_t d = 0; d < stages_per_dc.size(); ++d) {
    if (stages_per_dc[d] * pipelines > network.dcs[d].gpus)
      throw InputError(fmt::format("{}: {} stages x {} pipelines need {} GPUs, it has {}", network.dcs[d].name,
                                   stages_per_dc[d], pipelines, stages_per_dc[d] * pipelines, network.dcs[d].gpus));
    for (int k = 0; k < stages_per_dc[d]; ++k, ++stage)
      for (int q = 0; q < pipelines; ++q) p.dc[static_cast<std::size_t>(p.gpu(q, stage))] = static_cast<int>(d);
    p.used_per_dc[d] = stages_per_dc[d] * pipelines;
  }
  return p;
}

}  // namespace perseus::geo
