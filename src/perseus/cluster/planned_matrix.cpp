#include "perseus/cluster/planned_matrix.hpp"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/planner.hpp"

namespace perseus::cluster {

std::vector<std::string> default_planned_models() {
  return {"bert-large", "t5-large", "gpt3-1.3b", "qwen3-1.7b", "bloom-3b", "llama3.2-3b", "wide-resnet50-8"};
}

std::vector<std::string> default_planned_gpus() { return {"a40", "a100-sxm", "h100-sxm"}; }

namespace {

void check(const PlannedMatrixSpec& spec) {
  if (spec.models.empty()) throw InputError("planning a throughput matrix needs at least one model");
  if (spec.gpus.empty()) throw InputError("planning a throughput matrix needs at least one GPU");
  if (spec.scale_factors.empty()) throw InputError("planning a throughput matrix needs at least one scale factor");
  for (int s : spec.scale_factors)
    if (s < 1) throw InputError(fmt::format("scale factor {}: must be at least 1", s));
  if (spec.operating_points < 1) throw InputError(fmt::format("{} operating points: need at least 1", spec.operating_points));
  if (spec.global_batch < 0) throw InputError(fmt::format("global batch {}: must be > 0 (0: the model's)", spec.global_batch));
  for (const std::string& m : spec.models) planner::find_model(m);  // InputError listing the catalogue
  for (const std::string& g : spec.gpus) planner::find_gpu(g);
}

// The cell's operating points, each at the cluster's scale (every GPU of the job, the all-reduce
// added). The frontier is Pareto-optimal in effective energy (above blocking), so its slower
// points may draw more energy in all: the candidates are the points whose energy is below every
// faster point's, ending at the least-energy plan; of those, the slowest no slower than each of
// `count` times spread evenly from T_min to that plan.
std::vector<OperatingPoint> operating_points(const planner::PlanReport& r, int count, PlannedCell& cell) {
  const Frontier& f = r.frontier;
  const double all_reduce_s = r.chosen.data_parallel_s;
  const double replicas = static_cast<double>(r.chosen.config.tensor) * r.chosen.config.data;
  const double stages = static_cast<double>(r.problem->num_gpus());
  const auto time_of = [&](const MeasuredFigures& m) { return m.time_s + all_reduce_s; };
  const auto energy_of = [&](const MeasuredFigures& m) { return (m.energy_j + r.p_blocking * stages * all_reduce_s) * replicas; };
  std::vector<double> times;
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < f.points.size(); ++i)
    if (candidates.empty() || f.points[i].measured.energy_j < f.points[candidates.back()].measured.energy_j) {
      candidates.push_back(i);
      times.push_back(f.points[i].measured.time_s);
    }
  std::vector<OperatingPoint> out;
  std::size_t last = candidates.size();
  for (int k = 0; k < count; ++k) {
    const double target = count == 1 ? times.front() : times.front() + (times.back() - times.front()) * k / (count - 1);
    const std::size_t c = select_for_deadline(times, target * (1.0 + 1e-12)).value_or(0);
    if (c == last) continue;
    last = c;
    const MeasuredFigures& m = f.points[candidates[c]].measured;
    out.push_back({1.0 / time_of(m), energy_of(m)});
  }
  cell.t_min_s = time_of(f.t_min_point().measured);
  cell.t_star_s = time_of(f.t_star_point().measured);
  cell.t_min_energy_j = energy_of(f.t_min_point().measured);
  cell.t_star_energy_j = energy_of(f.t_star_point().measured);
  cell.least_energy_s = time_of(f.points[candidates.back()].measured);
  cell.least_energy_j = energy_of(f.points[candidates.back()].measured);
  cell.all_max_energy_j = energy_of(f.all_max);
  return out;
}

}  // namespace

PlannedMatrix plan_matrix(const PlannedMatrixSpec& spec) {
  check(spec);
  PlannedMatrix out;
  ThroughputMatrix& t = out.matrix;
  for (const std::string& g : spec.gpus) t.gpu_types.push_back(planner::find_gpu(g).name);
  const int total = static_cast<int>(spec.models.size() * spec.scale_factors.size() * spec.gpus.size());
  for (const std::string& model_name : spec.models) {
    const std::string model = planner::find_model(model_name).name;
    for (int scale : spec.scale_factors) {
      std::vector<std::vector<OperatingPoint>> row(spec.gpus.size());
      bool fits_somewhere = false;
      for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
        PlannedCell cell;
        cell.model = model, cell.gpu = t.gpu_types[g], cell.scale_factor = scale;
        if (spec.progress) spec.progress(static_cast<int>(out.cells.size()), total, fmt::format("{} x{} on {}", model, scale, cell.gpu));
        planner::PlanRequest request;
        request.model = model;
        request.gpu = cell.gpu;
        request.num_gpus = scale;
        request.global_batch = spec.global_batch;
        request.refine = spec.refine;
        // Every GPU type timed from the same source, its profiles' fit: the A40 has no
        // published-runs fit, and mixing the two would make it look faster than it is next to
        // the A100 (whose end-to-end fit runs about 1.4x slower than its profiles).
        request.time_model = planner::TimeModel::kProfiles;
        request.straggler_slowdowns.clear();
        const auto start = std::chrono::steady_clock::now();
        try {
          const planner::PlanReport r = planner::plan_training(request);
          cell.configuration = planner::describe(r.chosen.config);
          row[g] = operating_points(r, spec.operating_points, cell);
          cell.fits = true;
          fits_somewhere = true;
        } catch (const InputError& e) {
          cell.why_not = e.what();  // does not fit, or the batch does not divide: not on this type
        }
        cell.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        out.cells.push_back(std::move(cell));
      }
      const JobType type{model, scale};
      if (!fits_somewhere) {
        out.left_out.push_back(type.name());
        continue;
      }
      t.job_types.push_back(type);
      std::vector<double> fastest;
      for (const auto& points : row) fastest.push_back(points.empty() ? 0.0 : points.front().steps_per_s);
      t.steps_per_s.push_back(std::move(fastest));
      t.operating_points.push_back(std::move(row));
    }
  }
  if (spec.progress) spec.progress(total, total, "");
  if (t.job_types.empty())
    throw InputError(fmt::format("no model fits any of the GPUs at the scale factors given (first reason: {})",
                                 out.cells.empty() ? "-" : out.cells.front().why_not));
  validate(t);
  return out;
}

}  // namespace perseus::cluster
