#include "perseus/planner/energy_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/planner/least_squares.hpp"

namespace perseus::planner {

OperationWork operation_work(std::span<const LayerCost> layers, InstructionKind kind) {
  OperationWork work;
  for (const LayerCost& layer : layers) {
    if (kind == InstructionKind::kRecompute && !layer.recomputed) continue;
    work.flops += layer.forward_flops;
    if (layer.gemm_width > 0.0) work.flops_per_width += layer.forward_flops / layer.gemm_width;
    work.memory_bytes += layer.memory_traffic_bytes;
    work.collective_bytes += layer.tp_comm_bytes;
  }
  if (kind == InstructionKind::kBackward) {
    work.flops *= 2.0;
    work.flops_per_width *= 2.0;
  }
  return work;
}

double collective_bandwidth(const GpuSpec& gpu, int tensor_parallel, double scale) {
  const double link =
      tensor_group_within_node(tensor_parallel, gpu.gpus_per_node) ? gpu.intra_node_busbw : gpu.inter_node_bandwidth;
  return link * scale;
}

EnergyModel::EnergyModel(const GpuSpec& gpu, const EnergyModelParams& params) : gpu_(gpu), params_(params) {}

EnergyModel::Split EnergyModel::split(const OperationWork& work, InstructionKind kind,
                                      double collective_bw) const {
  const bool backward = kind == InstructionKind::kBackward;
  const double eta = backward ? params_.gemm_efficiency_backward : params_.gemm_efficiency_forward;
  const double kappa = backward ? params_.memory_factor_backward : params_.memory_factor_forward;
  const double compute = (work.flops + params_.gemm_half_width * work.flops_per_width) / (eta * gpu_.peak_flops);
  const double memory = kappa * work.memory_bytes / gpu_.memory_bandwidth;
  const double collective = collective_bw > 0.0 ? work.collective_bytes / collective_bw : 0.0;
  return {compute, memory + collective, memory + collective};
}

// Power while running at `mhz`: compute-bound phases draw the compute dynamic power, the rest
// the memory dynamic power, both scaled by C*V^2*f with the voltage floor.
double dynamic_power_factor(double mhz, double max_mhz, double voltage_floor) {
  const double x = mhz / max_mhz;
  const double v = std::max(voltage_floor, x);
  return x * v * v;
}

double highest_clock_within(double lo, double hi, double limit, const std::function<double(double)>& power) {
  if (power(lo) >= limit) return lo;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (power(mid) > limit ? hi : lo) = mid;
  }
  return lo;
}

double EnergyModel::power(const Split& s, double mhz) const {
  const double x = mhz / gpu_.max_mhz;
  const double g = dynamic_power_factor(mhz, gpu_.max_mhz, params_.voltage_floor);
  const double compute = s.compute_at_max_s / x;
  const double total = compute + s.fixed_s;
  if (total <= 0.0) return params_.static_power_w;
  return params_.static_power_w +
         g * (params_.compute_power_w * compute + params_.memory_power_w * s.memory_share_s) / total;
}

OperationEstimate EnergyModel::estimate(const OperationWork& work, InstructionKind kind, double frequency_mhz,
                                        double collective_bw) const {
  const Split s = split(work, kind, collective_bw);
  double effective = frequency_mhz;
  if (power(s, effective) > params_.power_limit_w) {
    // Power rises with the clock; find where it meets the limit.
    effective = highest_clock_within(std::min<double>(gpu_.min_mhz, frequency_mhz), frequency_mhz,
                                     params_.power_limit_w, [&](double mhz) { return power(s, mhz); });
  }
  OperationEstimate out;
  out.frequency_mhz = static_cast<int>(std::lround(frequency_mhz));
  out.effective_mhz = effective;
  out.compute_s = s.compute_at_max_s * gpu_.max_mhz / effective;
  out.fixed_s = s.fixed_s;
  out.time_s = out.compute_s + out.fixed_s;
  out.energy_j = power(s, effective) * out.time_s;
  return out;
}

double EnergyModel::time_at_max(const OperationWork& work, InstructionKind kind, double collective_bw) const {
  return estimate(work, kind, gpu_.max_mhz, collective_bw).time_s;
}

Profile synthesize_profile(const EnergyModel& model, std::span<const LayerCost> layers,
                           std::span<const int> boundaries, int tensor_parallel, const SynthesisOptions& options,
                           std::string source_name) {
  if (boundaries.size() < 2 || boundaries.front() != 0 ||
      boundaries.back() != static_cast<int>(layers.size())) {
    throw InputError(fmt::format("synthesize: stage boundaries must run from 0 to the {} layers", layers.size()));
  }
  for (std::size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      throw InputError(fmt::format("synthesize: stage {} has no layers (boundaries must increase)", i - 1));
    }
  }
  const std::vector<int> frequencies =
      options.frequencies.empty() ? supported_frequencies(model.gpu(), model.gpu().profile_min_mhz)
                                  : options.frequencies;
  const double bw = options.collective_bandwidth > 0.0
                        ? options.collective_bandwidth
                        : collective_bandwidth(model.gpu(), tensor_parallel, model.params().collective_scale);
  std::vector<OperationProfile> operations;
  int line = 2;
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s) {
    const auto stage_layers = layers.subspan(boundaries[s], boundaries[s + 1] - boundaries[s]);
    for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward, InstructionKind::kRecompute}) {
      if (kind == InstructionKind::kRecompute && !options.recompute) continue;
      const OperationWork work = operation_work(stage_layers, kind);
      if (kind == InstructionKind::kRecompute && work.flops <= 0.0 && work.memory_bytes <= 0.0) continue;
      OperationProfile op{static_cast<int>(s), kind, {}};
      for (int f : frequencies) {
        const OperationEstimate e = model.estimate(work, kind, f, bw);
        if (!(e.time_s > 0.0)) {
          throw InputError(fmt::format("synthesize: stage {} ({} .. {}) has no {} work on {}; move its layers into a "
                                       "neighbouring stage",
                                       s, stage_layers.front().name, stage_layers.back().name, to_string(kind),
                                       model.gpu().name));
        }
        op.measurements.push_back({std::to_string(f), f, e.time_s, e.energy_j, line++});
      }
      operations.push_back(std::move(op));
    }
  }
  return Profile::from_operations(std::move(source_name), std::move(operations));
}

std::string profile_to_csv(const Profile& profile) {
  std::ostringstream out;
  out << "stage,instruction,frequency,time,energy\n";
  for (const OperationProfile& op : profile.operations()) {
    for (const Measurement& m : op.measurements) {
      out << fmt::format("{},{},{},{:.9g},{:.9g}\n", op.stage, to_string(op.kind), m.frequency_mhz, m.time_s,
                         m.energy_j);
    }
  }
  return out.str();
}

namespace {

ErrorStats stats_of(std::vector<double> signed_errors) {
  ErrorStats s;
  s.count = signed_errors.size();
  if (signed_errors.empty()) return s;
  double sum = 0.0;
  for (double e : signed_errors) sum += e;
  s.mean_signed = sum / static_cast<double>(s.count);
  std::vector<double> abs_errors;
  for (double e : signed_errors) abs_errors.push_back(std::abs(e));
  std::sort(abs_errors.begin(), abs_errors.end());
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(abs_errors.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, abs_errors.size() - 1);
    return abs_errors[lo] + (pos - static_cast<double>(lo)) * (abs_errors[hi] - abs_errors[lo]);
  };
  s.median = quantile(0.5);
  s.p90 = quantile(0.9);
  s.max = abs_errors.back();
  return s;
}

}  // namespace

ProfileComparison compare_profiles(const Profile& measured, const Profile& predicted) {
  std::vector<double> time_errors, energy_errors;
  for (const OperationProfile& op : measured.operations()) {
    const OperationProfile* other = predicted.find(op.stage, op.kind);
    if (!other) continue;
    std::map<int, const Measurement*> by_frequency;
    for (const Measurement& m : other->measurements) by_frequency[m.frequency_mhz] = &m;
    for (const Measurement& m : op.measurements) {
      const auto it = by_frequency.find(m.frequency_mhz);
      if (it == by_frequency.end()) continue;
      time_errors.push_back(it->second->time_s / m.time_s - 1.0);
      energy_errors.push_back(it->second->energy_j / m.energy_j - 1.0);
    }
  }
  if (time_errors.empty()) {
    throw InputError("compare: " + measured.source() + " and " + predicted.source() +
                     " share no (stage, instruction, frequency) row");
  }
  return {stats_of(std::move(time_errors)), stats_of(std::move(energy_errors))};
}

std::vector<int> reference_boundaries(const ModelSpec& model, std::size_t num_layers, int stages) {
  if (stages < 1) throw InputError("the number of stages must be at least 1");
  // Blocks between the first (embedding) and the last (head) layer.
  const int blocks = static_cast<int>(num_layers) - 2;
  const int per_stage = (blocks + stages - 1) / stages;
  if (blocks < stages || per_stage * (stages - 1) >= blocks) {
    throw InputError(fmt::format("{} has {} blocks, too few for {} stages of {} blocks", model.name, blocks, stages,
                                 per_stage));
  }
  std::vector<int> boundaries{0};
  for (int s = 1; s < stages; ++s) boundaries.push_back(1 + s * per_stage);
  boundaries.push_back(static_cast<int>(num_layers));
  return boundaries;
}

ReferenceCase reference_case(const std::filesystem::path& profile_csv) {
  const std::string stem = profile_csv.stem().string();
  const auto plus = stem.find('+');
  if (plus == std::string::npos) {
    throw InputError(profile_csv.string() + ": a reference profile must be named <model>+<gpu>.csv");
  }
  ReferenceCase c;
  c.name = stem;
  c.model = &find_model(stem.substr(0, plus));
  c.gpu = &find_gpu(stem.substr(plus + 1));
  c.measured = Profile::read_csv(profile_csv);
  c.workload = Workload{1, 8, 2048, false, false};
  const std::vector<LayerCost> layers = model_layers(*c.model, c.workload);
  c.boundaries = reference_boundaries(*c.model, layers.size(), c.measured.num_stages());
  return c;
}

namespace {

// Unconstrained coordinates of the fitted parameters.
enum Coordinate {
  kLogEtaF, kLogEtaB, kLogKappaF, kLogKappaB, kLogCollective, kLogStatic, kLogCompute, kMemoryShare, kFloor,
  kLimit, kCoordinates
};

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double logit(double p) { return std::log(p / (1.0 - p)); }

EnergyModelParams decode(const Eigen::VectorXd& x, double idle_w) {
  EnergyModelParams p;
  p.gemm_efficiency_forward = std::exp(x[kLogEtaF]);
  p.gemm_efficiency_backward = std::exp(x[kLogEtaB]);
  p.memory_factor_forward = std::exp(x[kLogKappaF]);
  p.memory_factor_backward = std::exp(x[kLogKappaB]);
  p.collective_scale = std::exp(x[kLogCollective]);
  p.static_power_w = idle_w + std::exp(x[kLogStatic]);  // at least what an idle GPU draws
  p.compute_power_w = std::exp(x[kLogCompute]);
  p.memory_power_w = p.compute_power_w * logistic(x[kMemoryShare]);  // no more than compute
  p.voltage_floor = std::clamp(x[kFloor], 0.2, 1.0);
  p.power_limit_w = x[kLimit];
  return p;
}

Eigen::VectorXd encode(const EnergyModelParams& p, double idle_w) {
  Eigen::VectorXd x(kCoordinates);
  x[kLogEtaF] = std::log(p.gemm_efficiency_forward);
  x[kLogEtaB] = std::log(p.gemm_efficiency_backward);
  x[kLogKappaF] = std::log(std::max(p.memory_factor_forward, 1e-6));
  x[kLogKappaB] = std::log(std::max(p.memory_factor_backward, 1e-6));
  x[kLogCollective] = std::log(p.collective_scale);
  x[kLogStatic] = std::log(std::max(p.static_power_w - idle_w, 1e-3));
  x[kLogCompute] = std::log(p.compute_power_w);
  x[kMemoryShare] = logit(std::clamp(p.memory_power_w / p.compute_power_w, 1e-6, 1.0 - 1e-6));
  x[kFloor] = p.voltage_floor;
  x[kLimit] = p.power_limit_w;
  return x;
}

struct Row {
  OperationWork work;
  InstructionKind kind;
  int frequency;
  double time_s, energy_j;
  double collective_bw;  // before collective_scale
};

struct CalibrationResiduals : DynamicResiduals {
  const GpuSpec* gpu;
  const std::vector<Row>* rows;
  bool fit_collective;
  double fixed_collective_log;

  int inputs() const { return kCoordinates; }
  int values() const { return static_cast<int>(2 * rows->size()); }

  int operator()(const Eigen::VectorXd& x_in, Eigen::VectorXd& f) const {
    Eigen::VectorXd x = x_in;
    if (!fit_collective) x[kLogCollective] = fixed_collective_log;
    const EnergyModelParams p = decode(x, gpu->idle_power_w);
    const EnergyModel model(*gpu, p);
    for (std::size_t i = 0; i < rows->size(); ++i) {
      const Row& r = (*rows)[i];
      const OperationEstimate e = model.estimate(r.work, r.kind, r.frequency, r.collective_bw * p.collective_scale);
      f[static_cast<Eigen::Index>(2 * i)] = e.time_s / r.time_s - 1.0;
      f[static_cast<Eigen::Index>(2 * i + 1)] = e.energy_j / r.energy_j - 1.0;
    }
    if (!f.allFinite()) f.setConstant(1e3);
    return 0;
  }
};

}  // namespace

CalibrationResult calibrate(const std::vector<ReferenceCase>& cases, const CalibrationOptions& options) {
  if (cases.empty()) throw InputError("calibrate: no measured profile given");
  const GpuSpec& gpu = *cases.front().gpu;
  std::vector<Row> rows;
  double max_power = 0.0;
  for (const ReferenceCase& c : cases) {
    if (c.gpu->name != gpu.name) {
      throw InputError("calibrate: " + c.name + " was measured on " + c.gpu->name + ", not " + gpu.name);
    }
    const std::vector<LayerCost> layers = model_layers(*c.model, c.workload);
    const double bw = collective_bandwidth(gpu, c.workload.tensor_parallel);
    for (const OperationProfile& op : c.measured.operations()) {
      if (op.kind != InstructionKind::kForward && op.kind != InstructionKind::kBackward) continue;
      if (op.stage + 1 >= static_cast<int>(c.boundaries.size())) {
        throw InputError(fmt::format("calibrate: {} has stage {} but its configuration only {} stages", c.name,
                                     op.stage, c.boundaries.size() - 1));
      }
      const auto stage_layers = std::span<const LayerCost>(layers).subspan(
          c.boundaries[op.stage], c.boundaries[op.stage + 1] - c.boundaries[op.stage]);
      const OperationWork work = operation_work(stage_layers, op.kind);
      for (const Measurement& m : op.measurements) {
        rows.push_back({work, op.kind, m.frequency_mhz, m.time_s, m.energy_j, bw});
        max_power = std::max(max_power, m.energy_j / m.time_s);
      }
    }
  }
  if (rows.size() < 2 * kCoordinates) throw InputError("calibrate: too few measurements to fit the energy model");

  CalibrationResiduals functor{{}, &gpu, &rows, options.fit_collective_scale, 0.0};
  std::optional<Eigen::VectorXd> best;
  double best_cost = std::numeric_limits<double>::infinity();
  int starts = 0;
  for (double floor : options.voltage_floor_starts) {
    for (double eta : {0.5, 0.9}) {
      EnergyModelParams start;
      start.gemm_efficiency_forward = start.gemm_efficiency_backward = eta;
      start.memory_factor_forward = start.memory_factor_backward = 1.0;
      start.collective_scale = 1.0;
      start.static_power_w = 0.3 * max_power;
      start.compute_power_w = 0.7 * max_power;
      start.memory_power_w = 0.2 * max_power;
      start.voltage_floor = floor;
      start.power_limit_w = max_power;
      Eigen::VectorXd x = encode(start, gpu.idle_power_w);
      minimize_least_squares(functor, x, 4000, 1e-10, 1e-10);
      ++starts;
      Eigen::VectorXd f(functor.values());
      functor(x, f);
      const double cost = f.squaredNorm();
      if (std::isfinite(cost) && cost < best_cost) {
        best_cost = cost;
        best = x;
      }
    }
  }
  if (!best) throw SolveError("calibrate: no start of the fit converged for " + gpu.name);
  Eigen::VectorXd x = *best;
  if (!options.fit_collective_scale) x[kLogCollective] = 0.0;

  CalibrationResult result;
  result.params = decode(x, gpu.idle_power_w);
  result.starts = starts;
  result.rms_relative_error = std::sqrt(best_cost / static_cast<double>(functor.values()));
  for (const ReferenceCase& c : cases) result.per_case.push_back(compare_with_reference(c, result.params));
  return result;
}

ProfileComparison compare_with_reference(const ReferenceCase& reference, const EnergyModelParams& params) {
  const EnergyModel model(*reference.gpu, params);
  const std::vector<LayerCost> layers = model_layers(*reference.model, reference.workload);
  const Profile predicted = synthesize_profile(model, layers, reference.boundaries, reference.workload.tensor_parallel,
                                               SynthesisOptions{}, "predicted " + reference.name);
  return compare_profiles(reference.measured, predicted);
}

}  // namespace perseus::planner
