#include "perseus/kareus/measured.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "perseus/model/statistics.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus::kareus {
namespace {

// Ranks (0-based, ties in order of appearance) and Spearman's correlation between two series.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t k = 0; k < order.size(); ++k) r[order[k]] = static_cast<double>(k);
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2) return 0.0;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(a.size()) - 1.0) / 2.0;
  double num = 0.0, da = 0.0, db = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    num += (ra[k] - mean) * (rb[k] - mean);
    da += (ra[k] - mean) * (ra[k] - mean);
    db += (rb[k] - mean) * (rb[k] - mean);
  }
  return da > 0.0 && db > 0.0 ? num / std::sqrt(da * db) : 0.0;
}

}  // namespace

std::vector<MeasuredConfig> read_measured_space(const std::filesystem::path& path, int clock_mhz) {
  static constexpr std::string_view kRequired[] = {"overlap_start", "overlap_end", "comm_sm_number", "comm_block_size",
                                                   "0:time (s)", "0:total energy (J)"};
  const csv::Table table = csv::parse(csv::read_file(path), path.string(), kRequired);
  const int first = table.column("overlap_start"), last = table.column("overlap_end");
  const int sms = table.column("comm_sm_number"), block = table.column("comm_block_size");
  std::vector<std::pair<int, int>> repeats;  // (time, total energy) columns
  for (int k = 0;; ++k) {
    const int t = table.column(fmt::format("{}:time (s)", k));
    const int e = table.column(fmt::format("{}:total energy (J)", k));
    if (t < 0 || e < 0) break;
    repeats.emplace_back(t, e);
  }
  std::vector<MeasuredConfig> out;
  for (const csv::Row& row : table.rows) {
    MeasuredConfig m;
    m.config = {clock_mhz, static_cast<int>(csv::parse_integer(table, row, sms, 1, 1024, "an SM count")),
                static_cast<int>(csv::parse_integer(table, row, first, -1, 1024, "a kernel number or -1")),
                static_cast<int>(csv::parse_integer(table, row, last, -1, 1024, "a kernel number or -1"))};
    m.block_size = static_cast<int>(csv::parse_integer(table, row, block, 1, 1 << 20, "a block size"));
    std::vector<double> times, energies;
    for (const auto& [t, e] : repeats) {
      times.push_back(csv::parse_finite(table, row, t));
      energies.push_back(csv::parse_finite(table, row, e) / 2.0);  // two GPUs
    }
    for (double t : times) m.time_s += t / static_cast<double>(times.size());
    for (double e : energies) m.energy_j += e / static_cast<double>(energies.size());
    for (std::size_t k = 0; k < times.size(); ++k) {
      m.spread = std::max({m.spread, std::abs(times[k] / m.time_s - 1.0), std::abs(energies[k] / m.energy_j - 1.0)});
    }
    if (!(m.time_s > 0.0) || !(m.energy_j > 0.0) || m.config.comm_sms < 1 || (m.config.first < 0) != (m.config.last < 0) ||
        m.config.last < m.config.first) {
      throw InputError(fmt::format("{}:{}: not a measured configuration (window {}..{}, {} SMs, {} s, {} J)",
                                   path.string(), row.line, m.config.first, m.config.last, m.config.comm_sms, m.time_s,
                                   m.energy_j));
    }
    out.push_back(m);
  }
  return out;
}

Partition measured_attention_partition() {
  const double tokens = 2 * 4096.0, h = 2048, a = 2048 / 2.0, kv = 8 * 64 / 2.0, e = 2.0;
  const auto linear = [&](std::string name, double in, double out) {
    return Kernel{std::move(name), 2.0 * tokens * in * out, e * (in * out + tokens * (in + out))};
  };
  return Partition{"attention-allreduce",
                   true,
                   {Kernel{"bias-dropout-add", 0.0, 3 * e * tokens * h},
                    Kernel{"layer-norm", 0.0, 2 * e * tokens * h},
                    linear("qkv", h, a + 2 * kv),
                    Kernel{"qkv-post", 0.0, 2 * e * tokens * (a + 2 * kv)},
                    Kernel{"rotary", 0.0, 2 * e * tokens * (a + kv)},
                    Kernel{"attention", 2.0 * tokens * 4096 * a, e * tokens * (2 * a + 2 * kv), true},
                    linear("out-proj", a, h)},
                   {"allreduce", 2.0 * (2 - 1) / 2 * e * tokens * h},
                   1};
}

TableEvaluator::TableEvaluator(std::vector<MeasuredConfig> rows, int block_size, double static_power_w)
    : static_power_w_(static_power_w) {
  for (MeasuredConfig& r : rows) {
    if (r.block_size == block_size) rows_.push_back(std::move(r));
  }
  if (rows_.empty()) throw InputError(fmt::format("kareus: no measured configuration with block size {}", block_size));
}

Measurement TableEvaluator::evaluate(const Partition& partition, const Config& config) {
  for (const MeasuredConfig& r : rows_) {
    if (r.config == config) {
      const double static_j = std::min(r.energy_j, static_power_w_ * r.time_s);
      return {r.time_s, r.energy_j - static_j, static_j, static_cast<double>(config.clock_mhz)};
    }
  }
  throw InputError(fmt::format("kareus: {} was not measured", describe(config, partition)));
}

ModelError model_error(const EmulatedGpu& gpu, const Partition& partition, const std::vector<MeasuredConfig>& rows) {
  EmulatedGpu model = gpu;
  std::vector<double> time_errors, energy_errors, measured, modelled;
  for (const MeasuredConfig& r : rows) {
    const Measurement m = model.evaluate(partition, r.config);
    time_errors.push_back(std::abs(m.time_s / r.time_s - 1.0));
    energy_errors.push_back(std::abs(m.total_j() / r.energy_j - 1.0));
    measured.push_back(r.time_s);
    modelled.push_back(m.time_s);
  }
  ModelError out;
  out.time_rank_correlation = spearman(measured, modelled);
  std::map<int, std::pair<std::size_t, std::size_t>> picks;  // clock -> (model's fastest, measured fastest)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto [it, added] = picks.try_emplace(rows[i].config.clock_mhz, i, i);
    if (modelled[i] < modelled[it->second.first]) it->second.first = i;
    if (measured[i] < measured[it->second.second]) it->second.second = i;
  }
  for (const auto& [clock, pick] : picks) out.fastest_pick_loss += measured[pick.first] / measured[pick.second] - 1.0;
  if (!picks.empty()) out.fastest_pick_loss /= static_cast<double>(picks.size());
  out.time_median = median(time_errors);
  out.energy_median = median(energy_errors);
  out.time_worst = time_errors.empty() ? 0.0 : *std::max_element(time_errors.begin(), time_errors.end());
  out.energy_worst = energy_errors.empty() ? 0.0 : *std::max_element(energy_errors.begin(), energy_errors.end());
  return out;
}

Calibration calibrate(const planner::GpuSpec& gpu, const Partition& partition, const std::vector<MeasuredConfig>& rows) {
  if (rows.empty()) throw InputError("kareus calibration: no measured configurations");
  Calibration out;
  out.gpu = gpu;
  out.before = model_error(EmulatedGpu(gpu), partition, rows);
  planner::GpuSpec scaled = gpu;
  for (int round = 0; round < 2; ++round) {
    double best = std::numeric_limits<double>::infinity();
    out.candidates = 0;
    // Coarse grids: each figure is a physical constant whose plausible range is narrow.
    for (double saturate : {4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0}) {
      for (double factor : {1.0, 2.0}) {
        for (double gemm : {0.1, 0.15, 0.2, 0.3, 0.45, 0.6, 0.9}) {
          for (double attention : {1.0, 0.5, 0.25}) {  // of the GEMM efficiency
            for (double memory : {0.2, 0.3, 0.5, 0.85}) {
              for (double launch : {4e-6, 50e-6}) {
                GpuModelParams p;
                p.sms_to_saturate_link = saturate;
                p.comm_memory_factor = factor;
                p.gemm_efficiency = gemm;
                p.attention_efficiency = attention * gemm;
                p.memory_efficiency = memory;
                p.launch_s = launch;
                ++out.candidates;
                const ModelError e = model_error(EmulatedGpu(scaled, p), partition, rows);
                if (e.time_median + e.fastest_pick_loss < best) best = e.time_median + e.fastest_pick_loss, out.params = p;
              }
            }
          }
        }
      }
    }
    // One factor on the dynamic power, fitted on the energy with the time model fixed.
    double best_energy = std::numeric_limits<double>::infinity();
    for (double scale = 0.3; scale <= 2.0 + 1e-9; scale += 0.05) {
      planner::GpuSpec candidate = gpu;
      candidate.energy.compute_power_w *= scale;
      candidate.energy.memory_power_w *= scale;
      const double error = model_error(EmulatedGpu(candidate, out.params), partition, rows).energy_median;
      if (error < best_energy) best_energy = error, out.dynamic_power_scale = scale, scaled = candidate;
    }
  }
  out.gpu = scaled;
  out.after = model_error(EmulatedGpu(out.gpu, out.params), partition, rows);
  return out;
}

}  // namespace perseus::kareus
