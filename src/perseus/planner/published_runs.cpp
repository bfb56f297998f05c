#include "perseus/planner/published_runs.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "perseus/planner/least_squares.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus::planner {

std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path) {
  std::string text = csv::read_file(path);
  // Comment lines become blank lines, which the reader skips, so line numbers stay the file's.
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    if (text[at] == '#') std::fill(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(end), ' ');
    at = end + 1;
  }
  static constexpr std::array<std::string_view, 11> kColumns = {
      "source", "parameters_b", "layers", "hidden", "heads", "tensor", "pipeline", "gpus", "global_batch",
      "microbatch", "tflops_per_gpu"};
  const csv::Table table = csv::parse(text, path.string(), kColumns);
  std::vector<PublishedRun> runs;
  for (const csv::Row& row : table.rows) {
    const auto integer = [&](std::string_view name, long long min_value, bool optional) {
      const int c = table.column(name);
      if (optional && row.fields[c].empty()) return 0;
      return static_cast<int>(csv::parse_integer(table, row, c, min_value, 1 << 24, "a positive integer"));
    };
    const auto positive = [&](std::string_view name) {
      const int c = table.column(name);
      const double v = csv::parse_finite(table, row, c);
      if (!(v > 0.0)) throw InputError(table.field_error(row, c, "a positive number"));
      return v;
    };
    PublishedRun run;
    run.source = row.fields[table.column("source")];
    run.parameters_b = positive("parameters_b");
    run.layers = integer("layers", 1, false);
    run.hidden = integer("hidden", 1, false);
    run.heads = integer("heads", 1, false);
    run.tensor = integer("tensor", 1, false);
    run.pipeline = integer("pipeline", 1, true);
    run.gpus = integer("gpus", 1, false);
    run.global_batch = integer("global_batch", 1, false);
    run.microbatch = integer("microbatch", 1, true);
    run.tflops_per_gpu = positive("tflops_per_gpu");
    run.line = row.line;
    runs.push_back(std::move(run));
  }
  if (runs.empty()) throw InputError(fmt::format("{}: no published run", path.string()));
  return runs;
}

double published_iteration_flops(const PublishedRun& run, int seq_len, int vocab) {
  const double b = run.global_batch, s = seq_len, l = run.layers, h = run.hidden, v = vocab;
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

SweepOptions published_run_options(const PublishedRun& run, const EnergyModelParams& params) {
  SweepOptions sweep;
  sweep.global_batch = run.global_batch;
  sweep.schedules = {ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B};
  sweep.interleave_chunks = {2, 3, 4};
  sweep.recompute = {true};
  sweep.megatron_layer_split = true;
  sweep.params = params;
  return sweep;
}

PublishedRunEstimate estimate_published_run(const PublishedRun& run, const GpuSpec& gpu,
                                            const EnergyModelParams& params, bool free_shape) {
  const ModelSpec model = resolve_model("", ModelShape{run.layers, run.hidden, run.heads, 2048, 51200});
  SweepOptions sweep = published_run_options(run, params);
  if (!free_shape) {
    sweep.tensor = run.tensor;
    sweep.pipeline = run.pipeline;
    if (run.microbatch > 0) sweep.microbatch_sizes = {run.microbatch};
  }
  const std::vector<ConfigEstimate> estimates = sweep_configurations(model, ClusterSpec{&gpu, run.gpus}, sweep);
  PublishedRunEstimate out;
  out.estimate = estimates.front();  // the fastest that fits, or the fastest when none does
  out.tflops_per_gpu = published_iteration_flops(run) / (out.estimate.iteration_time_s * run.gpus) / 1e12;
  out.ratio = out.tflops_per_gpu / run.tflops_per_gpu;
  return out;
}

namespace {

// Coordinates of the fit: efficiency, half width in thousands, memory passes, collective share,
// all kept positive by taking magnitudes (LM is unconstrained).
PublishedRunsFit decode(const Eigen::VectorXd& x) {
  return {std::min(1.0, std::abs(x[0])), 1000.0 * std::abs(x[1]), std::abs(x[2]), std::abs(x[3])};
}
Eigen::VectorXd encode(const PublishedRunsFit& f) {
  Eigen::VectorXd x(4);
  x << f.gemm_efficiency, f.gemm_half_width / 1000.0, f.memory_factor, f.collective_scale;
  return x;
}

struct LogRatioResiduals : DynamicResiduals {
  const std::vector<const PublishedRun*>* runs;
  const GpuSpec* gpu;
  int* evaluations;

  int inputs() const { return 4; }
  int values() const { return static_cast<int>(runs->size()); }
  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& f) const {
    const EnergyModelParams params = with_published_fit(gpu->energy, decode(x));
    for (std::size_t i = 0; i < runs->size(); ++i) {
      f[static_cast<Eigen::Index>(i)] = std::log(estimate_published_run(*(*runs)[i], *gpu, params).ratio);
    }
    ++*evaluations;
    return 0;
  }
};

PublishedRunsFit fit_subset(const std::vector<const PublishedRun*>& runs, const GpuSpec& gpu,
                            const PublishedRunsFit& start, int* evaluations) {
  LogRatioResiduals functor{{}, &runs, &gpu, evaluations};
  Eigen::VectorXd x = encode(start);
  minimize_least_squares(functor, x, 400, 1e-8, 1e-10);
  return decode(x);
}

}  // namespace

PublishedFit fit_published_runs(const std::vector<PublishedRun>& runs, const GpuSpec& gpu,
                                const PublishedRunsFit& start, bool leave_one_out) {
  if (runs.empty()) throw InputError("fit to published runs: no run");
  std::vector<const PublishedRun*> all;
  for (const PublishedRun& run : runs) all.push_back(&run);
  PublishedFit out;
  out.fit = fit_subset(all, gpu, start, &out.evaluations);
  const EnergyModelParams params = with_published_fit(gpu.energy, out.fit);
  double sum = 0.0;
  for (const PublishedRun& run : runs) {
    out.ratios.push_back(estimate_published_run(run, gpu, params).ratio);
    sum += std::log(out.ratios.back()) * std::log(out.ratios.back());
  }
  out.rms_log_error = std::sqrt(sum / static_cast<double>(runs.size()));
  if (leave_one_out && runs.size() > 1) {
    // The refits are independent: spread over the cores (each writes its own slot).
    out.held_out_ratios.assign(runs.size(), 0.0);
    std::vector<int> evaluations(runs.size(), 0);
    std::atomic<std::size_t> next{0};
    const auto refit_next = [&] {
      for (std::size_t k = next++; k < runs.size(); k = next++) {
        std::vector<const PublishedRun*> others;
        for (std::size_t i = 0; i < runs.size(); ++i) {
          if (i != k) others.push_back(&runs[i]);
        }
        const PublishedRunsFit without = fit_subset(others, gpu, out.fit, &evaluations[k]);
        out.held_out_ratios[k] = estimate_published_run(runs[k], gpu, with_published_fit(gpu.energy, without)).ratio;
      }
    };
    const unsigned helpers = std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()),
                                                static_cast<unsigned>(runs.size())) - 1;
    std::vector<std::jthread> threads;
    for (unsigned i = 0; i < helpers; ++i) threads.emplace_back(refit_next);
    refit_next();
    threads.clear();  // joins
    for (int e : evaluations) out.evaluations += e;
  }
  return out;
}

}  // namespace perseus::planner
