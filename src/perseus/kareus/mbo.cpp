#include "perseus/kareus/mbo.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "perseus/model/statistics.hpp"

namespace perseus::kareus {

const char* to_string(SamplePass pass) {
  switch (pass) {
    case SamplePass::kTotalEnergy: return "total";
    case SamplePass::kDynamicEnergy: return "dynamic";
    case SamplePass::kStaticEnergy: return "static";
    case SamplePass::kUncertainty: return "uncertainty";
    case SamplePass::kInitial: break;
  }
  return "initial";
}

std::vector<float> features(const Partition& p, const Config& c, const planner::GpuSpec* gpu) {
  double flops = 0.0, bytes = 0.0;
  if (!c.sequential()) {
    for (int k = c.first; k <= c.last && k < static_cast<int>(p.compute.size()); ++k) {
      flops += p.compute[static_cast<std::size_t>(k)].flops;
      bytes += p.compute[static_cast<std::size_t>(k)].bytes;
    }
  }
  const double peak = gpu ? gpu->peak_flops : 312e12, bandwidth = gpu ? gpu->memory_bandwidth : 2039e9;
  return {static_cast<float>(c.clock_mhz), static_cast<float>(c.comm_sms), static_cast<float>(c.first),
          static_cast<float>(c.last), c.sequential() ? 1.0f : 0.0f, static_cast<float>(1e3 * flops / peak),
          static_cast<float>(1e3 * bytes / bandwidth)};
}

namespace {

// The hypervolume a point adds to a front (both minimised) under reference (rt, re).
double improvement(const std::vector<TradeoffPoint>& front, double base, double t, double e, double rt, double re) {
  if (t >= rt || e >= re) return 0.0;
  std::vector<TradeoffPoint> with = front;
  with.push_back({t, e, front.size()});
  return hypervolume(with, rt, re) - base;
}

struct Defaults {
  std::size_t initial, batch;
  int batches;
};
Defaults defaults_for(const Partition& p) {
  const std::size_t kernels = p.compute.size();
  if (kernels <= 1) return {36, 16, 3};
  if (kernels <= 3) return {48, 16, 4};
  return {96, 32, 4};
}

}  // namespace

MboResult mbo_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator, const MboOptions& o,
                     ResumableSearch io) {
  const Defaults d = defaults_for(partition);
  const std::size_t initial = std::min(o.initial ? o.initial : d.initial, space.size());
  const std::size_t batch = o.batch ? o.batch : d.batch;
  const int max_batches = o.max_batches ? o.max_batches : d.batches;
  if (o.ensemble < 2 || !(o.bootstrap_fraction > 0.0 && o.bootstrap_fraction <= 1.0) || o.stop_window < 1) {
    throw InputError("kareus MBO: the ensemble needs at least 2 models, a bootstrap fraction in (0, 1] and a "
                     "stop window of at least 1");
  }
  std::mt19937_64 rng(o.seed);
  std::vector<char> done(space.size(), 0);
  std::vector<Sample> samples;
  std::vector<SamplePass> pass;
  for (Sample& s : io.known) {
    if (s.index >= space.size() || !(space.at(s.index) == s.config) || done[s.index]) continue;
    done[s.index] = 1;
    samples.push_back(std::move(s));
    pass.push_back(SamplePass::kInitial);
  }
  const auto measure = [&](std::size_t index, SamplePass why) {
    const Config c = space.at(index);
    samples.push_back({index, c, evaluator.evaluate(partition, c)});
    pass.push_back(why);
    done[index] = 1;
    if (io.on_sample) io.on_sample(samples.back());
    if (io.progress) io.progress(samples.size(), space.size());
  };
  // Random initial samples (a seeded shuffle of the not yet measured).
  {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < space.size(); ++i) {
      if (!done[i]) order.push_back(i);
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; samples.size() < initial && i < order.size(); ++i) measure(order[i], SamplePass::kInitial);
  }

  // Every configuration's features once.
  std::vector<float> all_features;
  all_features.reserve(space.size() * kFeatureColumns);
  for (std::size_t i = 0; i < space.size(); ++i) {
    const std::vector<float> f = features(partition, space.at(i));
    all_features.insert(all_features.end(), f.begin(), f.end());
  }

  MboResult result;
  std::vector<double> hv_history;
  const auto measured_hv = [&] {
    // Normalised by the worst measured time and energy, reference 1.1 x (Appendix C).
    double t_max = 0.0, e_max = 0.0;
    for (const Sample& s : samples) t_max = std::max(t_max, s.measurement.time_s), e_max = std::max(e_max, s.measurement.total_j());
    std::vector<TradeoffPoint> points;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      points.push_back({samples[i].measurement.time_s / t_max, samples[i].measurement.total_j() / e_max, i});
    }
    return hypervolume(points, 1.1, 1.1);
  };
  hv_history.push_back(measured_hv());

  for (int b = 0; b < max_batches && samples.size() < space.size(); ++b) {
    // Training data, normalised by the worst measured time and dynamic energy.
    double t_max = 0.0, e_max = 0.0;
    std::vector<double> static_powers;
    for (const Sample& s : samples) {
      t_max = std::max(t_max, s.measurement.time_s);
      e_max = std::max(e_max, s.measurement.dynamic_j);
      static_powers.push_back(s.measurement.static_j / s.measurement.time_s);
    }
    const double static_power = median(std::move(static_powers));
    const auto train = [&](const std::vector<std::size_t>& rows, std::uint64_t seed) {
      std::vector<float> x, t, e;
      for (std::size_t r : rows) {
        const float* f = &all_features[samples[r].index * kFeatureColumns];
        x.insert(x.end(), f, f + kFeatureColumns);
        t.push_back(static_cast<float>(samples[r].measurement.time_s / t_max));
        e.push_back(static_cast<float>(samples[r].measurement.dynamic_j / e_max));
      }
      std::pair<Regressor, Regressor> models;
      models.first.fit(x, kFeatureColumns, t, o.trees, seed);
      models.second.fit(x, kFeatureColumns, e, o.trees, seed + 1);
      return models;
    };
    std::vector<std::size_t> every(samples.size());
    std::iota(every.begin(), every.end(), 0);
    const auto main_models = train(every, o.seed * 1000 + b);

    std::vector<std::size_t> candidates;
    std::vector<float> candidate_features;
    for (std::size_t i = 0; i < space.size(); ++i) {
      if (done[i]) continue;
      candidates.push_back(i);
      candidate_features.insert(candidate_features.end(), all_features.begin() + i * kFeatureColumns,
                                all_features.begin() + (i + 1) * kFeatureColumns);
    }
    const std::vector<float> t_hat = main_models.first.predict(candidate_features, kFeatureColumns);
    const std::vector<float> e_hat = main_models.second.predict(candidate_features, kFeatureColumns);

    // Uncertainty: the spread of a bootstrap ensemble.
    std::vector<double> t_sum(candidates.size(), 0.0), t_sq(candidates.size(), 0.0), e_sum = t_sum, e_sq = t_sq;
    const std::size_t draw = std::max<std::size_t>(2, static_cast<std::size_t>(o.bootstrap_fraction * samples.size()));
    for (int m = 0; m < o.ensemble; ++m) {
      std::uniform_int_distribution<std::size_t> pick(0, samples.size() - 1);
      std::vector<std::size_t> rows(draw);
      for (std::size_t& r : rows) r = pick(rng);
      const auto models = train(rows, o.seed * 1000 + 100 * (b + 1) + m);
      const std::vector<float> tm = models.first.predict(candidate_features, kFeatureColumns);
      const std::vector<float> em = models.second.predict(candidate_features, kFeatureColumns);
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        t_sum[c] += tm[c], t_sq[c] += double(tm[c]) * tm[c];
        e_sum[c] += em[c], e_sq[c] += double(em[c]) * em[c];
      }
    }
    const auto sd = [&](double sum, double sq) {
      const double mean = sum / o.ensemble;
      return std::sqrt(std::max(0.0, sq / o.ensemble - mean * mean));
    };

    // The measured fronts of each energy, normalised as the predictions, and their references.
    const auto front_of = [&](int which, double& rt, double& re) {
      std::vector<TradeoffPoint> points;
      double t_worst = 0.0, e_worst = 0.0;
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const Measurement& m = samples[i].measurement;
        const double t = m.time_s / t_max;
        const double e = which == 0 ? (m.dynamic_j + static_power * m.time_s) / e_max : which == 1 ? m.dynamic_j / e_max
                                                                                                   : static_power * m.time_s / e_max;
        points.push_back({t, e, i});
        t_worst = std::max(t_worst, t), e_worst = std::max(e_worst, e);
      }
      rt = 1.1 * t_worst, re = 1.1 * e_worst;
      return pareto_front(std::move(points));
    };
    std::vector<std::vector<double>> hvi(3, std::vector<double>(candidates.size(), 0.0));
    for (int which = 0; which < 3; ++which) {
      double rt, re;
      const std::vector<TradeoffPoint> front = front_of(which, rt, re);
      const double base = hypervolume(front, rt, re);
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        const double t = t_hat[c], dyn = e_hat[c], stat = static_power * t_hat[c] * t_max / e_max;
        const double e = which == 0 ? dyn + stat : which == 1 ? dyn : stat;
        hvi[which][c] = improvement(front, base, t, e, rt, re);
      }
    }
    // Multi-pass selection: each pass takes its share of the batch, best first, skipping what
    // an earlier pass took; uncertainty fills the rest.
    std::vector<char> taken(candidates.size(), 0);
    const std::size_t room = std::min(batch, candidates.size());
    const double shares[3] = {o.total_share, o.dynamic_share, o.static_share};
    const SamplePass passes[3] = {SamplePass::kTotalEnergy, SamplePass::kDynamicEnergy, SamplePass::kStaticEnergy};
    std::vector<std::pair<std::size_t, SamplePass>> chosen;
    for (int which = 0; which < 3; ++which) {
      const std::size_t quota = static_cast<std::size_t>(std::round(shares[which] * room));
      std::vector<std::size_t> order(candidates.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return hvi[which][a] > hvi[which][b]; });
      std::size_t got = 0;
      for (std::size_t c : order) {
        if (got == quota || chosen.size() == room) break;
        if (taken[c] || hvi[which][c] <= 0.0) continue;
        taken[c] = 1;
        chosen.emplace_back(c, passes[which]);
        ++got;
      }
    }
    std::vector<std::size_t> order(candidates.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return sd(t_sum[a], t_sq[a]) + sd(e_sum[a], e_sq[a]) > sd(t_sum[b], t_sq[b]) + sd(e_sum[b], e_sq[b]);
    });
    for (std::size_t c : order) {
      if (chosen.size() == room) break;
      if (!taken[c]) taken[c] = 1, chosen.emplace_back(c, SamplePass::kUncertainty);
    }
    for (const auto& [c, why] : chosen) measure(candidates[c], why);
    result.batches = b + 1;
    hv_history.push_back(measured_hv());
    // Stop when the hypervolume's relative growth, averaged over the last batches, is small.
    if (static_cast<int>(hv_history.size()) > o.stop_window) {
      double growth = 0.0;
      for (int k = 0; k < o.stop_window; ++k) {
        const double now = hv_history[hv_history.size() - 1 - k], before = hv_history[hv_history.size() - 2 - k];
        growth += before > 0.0 ? (now - before) / before : 1.0;
      }
      if (growth / o.stop_window < o.stop_epsilon) {
        result.converged = true;
        break;
      }
    }
  }
  result.pass = pass;
  result.frontier = frontier_of(std::move(samples));
  return result;
}

}  // namespace perseus::kareus
