#include "perseus/kareus/compose.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

namespace perseus::kareus {

std::string_view to_string(Method method) {
  switch (method) {
    case Method::kMegatron: return "Megatron-LM";
    case Method::kMegatronPerseus: return "Megatron-LM + Perseus";
    case Method::kNanobatchPerseus: return "Nanobatching + Perseus";
    case Method::kKareus: break;
  }
  return "Kareus";
}

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// The stage's work outside partitions: the first stage's embedding lookup, the last stage's LM
// head and loss, for the whole microbatch (both nanobatches), as one sequential "partition".
Partition stage_extras(const Workload& w, int stage, bool forward) {
  const planner::TransformerShape& t = w.model.transformer;
  const double tokens = static_cast<double>(w.microbatch_size) * (w.seq_len > 0 ? w.seq_len : t.seq_len) / w.context_parallel;
  const double h = t.hidden, vocab = static_cast<double>(t.vocab) / w.tensor_parallel;
  const double factor = forward ? 1.0 : 2.0;
  Partition p{"stage extras", forward, {}, {"", 0.0}, 1};
  if (stage == 0) p.compute.push_back({"embedding", 0.0, factor * 2.0 * 2 * tokens * h});
  if (stage == w.pipeline_parallel - 1) {
    p.compute.push_back({"lm-head", factor * 2.0 * tokens * h * vocab, factor * 2.0 * (h * vocab + tokens * (h + vocab))});
    p.compute.push_back({"cross-entropy", 0.0, factor * 2.0 * 3 * tokens * vocab});
  }
  return p;
}

bool allowed(Method method, const Config& c, int top_mhz, int kernels, int nccl_sms) {
  switch (method) {
    case Method::kMegatron: return c.sequential() && c.clock_mhz == top_mhz;
    case Method::kMegatronPerseus: return c.sequential();
    case Method::kNanobatchPerseus: return !c.sequential() && c.first == 0 && c.last == kernels - 1 && c.comm_sms == nccl_sms;
    case Method::kKareus: return true;
  }
  return false;
}

struct Combo {
  double time_s = 0.0, energy_j = 0.0;
  std::vector<std::size_t> samples;
};

std::vector<Combo> pruned(std::vector<Combo> combos) {
  std::vector<TradeoffPoint> points;
  for (std::size_t i = 0; i < combos.size(); ++i) points.push_back({combos[i].time_s, combos[i].energy_j, i});
  std::vector<Combo> out;
  for (const TradeoffPoint& p : pareto_front(std::move(points))) out.push_back(std::move(combos[p.id]));
  return out;
}

}  // namespace

std::vector<MicrobatchOption> microbatch_options(const Workload& w, std::span<const Partition> partitions,
                                                 std::span<const PartitionFrontier> frontiers, int stage, bool forward,
                                                 Method method, Evaluator& evaluator) {
  if (partitions.size() != frontiers.size()) {
    throw InputError(fmt::format("kareus: {} partitions but {} searched", partitions.size(), frontiers.size()));
  }
  // Clocks every partition of this direction was sampled at (allowed by the method).
  std::set<int> clocks;
  bool first = true;
  for (std::size_t k = 0; k < partitions.size(); ++k) {
    if (partitions[k].forward != forward) continue;
    std::set<int> here;
    for (const Sample& s : frontiers[k].samples) here.insert(s.config.clock_mhz);
    if (first) clocks = here;
    else {
      std::set<int> both;
      std::set_intersection(clocks.begin(), clocks.end(), here.begin(), here.end(), std::inserter(both, both.end()));
      clocks = both;
    }
    first = false;
  }
  if (method == Method::kMegatron) clocks = clocks.count(w.gpu.max_mhz) ? std::set<int>{w.gpu.max_mhz} : std::set<int>{};
  const Partition extras = stage_extras(w, stage, forward);

  std::vector<Combo> all;
  std::vector<int> clock_of;
  for (const int clock : clocks) {
    Combo base;
    if (!extras.compute.empty()) {
      const Measurement m = evaluator.evaluate(extras, Config{clock, 1, -1, -1});
      base.time_s = m.time_s;
      base.energy_j = m.total_j();
    }
    base.samples.assign(partitions.size(), kNone);
    std::vector<Combo> acc{base};
    bool feasible = true;
    for (std::size_t k = 0; k < partitions.size() && feasible; ++k) {
      const Partition& p = partitions[k];
      if (p.forward != forward) continue;
      int nccl_sms = 0;
      for (const Sample& s : frontiers[k].samples) nccl_sms = std::max(nccl_sms, s.config.comm_sms);
      std::vector<TradeoffPoint> here;
      for (std::size_t i = 0; i < frontiers[k].samples.size(); ++i) {
        const Sample& s = frontiers[k].samples[i];
        if (s.config.clock_mhz != clock ||
            !allowed(method, s.config, w.gpu.max_mhz, static_cast<int>(p.compute.size()), nccl_sms)) {
          continue;
        }
        here.push_back({s.measurement.time_s, s.measurement.total_j(), i});
      }
      const std::vector<TradeoffPoint> front = pareto_front(std::move(here));
      if (front.empty()) {
        feasible = false;
        break;
      }
      std::vector<Combo> next;
      next.reserve(acc.size() * front.size());
      for (const Combo& a : acc) {
        for (const TradeoffPoint& b : front) {
          Combo c = a;
          c.time_s += p.per_microbatch * b.time_s;
          c.energy_j += p.per_microbatch * b.energy_j;
          c.samples[k] = b.id;
          next.push_back(std::move(c));
        }
      }
      acc = pruned(std::move(next));
    }
    if (!feasible) continue;
    for (Combo& c : acc) {
      all.push_back(std::move(c));
      clock_of.push_back(clock);
    }
  }
  std::vector<TradeoffPoint> points;
  for (std::size_t i = 0; i < all.size(); ++i) points.push_back({all[i].time_s, all[i].energy_j, i});
  std::vector<MicrobatchOption> out;
  for (const TradeoffPoint& p : pareto_front(std::move(points))) {
    // Options within kSameOptionTime_s of a faster one are one: the cheaper stands for both.
    if (!out.empty() && p.time_s - out.back().time_s < kSameOptionTime_s) out.pop_back();
    out.push_back({clock_of[p.id], all[p.id].samples, all[p.id].time_s, all[p.id].energy_j});
  }
  if (out.empty()) {
    throw InputError(fmt::format("kareus: {} has no sampled schedule for stage {}'s {}", to_string(method), stage,
                                 forward ? "forward" : "backward"));
  }
  return out;
}

std::string schedule_label(const MicrobatchOption& option, std::span<const PartitionFrontier> frontiers, bool forward,
                           std::span<const Partition> partitions) {
  std::string label;
  for (std::size_t k = 0; k < partitions.size(); ++k) {
    if (partitions[k].forward != forward || option.samples[k] == kNone) continue;
    const Config& c = frontiers[k].samples[option.samples[k]].config;
    if (!label.empty()) label += '+';
    label += c.sequential() ? std::string("seq") : fmt::format("{}s{}-{}", c.comm_sms, c.first, c.last);
  }
  return label;
}

Profile method_profile(const Workload& w, std::span<const Partition> partitions,
                       std::span<const PartitionFrontier> frontiers, Method method, Evaluator& evaluator) {
  std::vector<OperationProfile> ops;
  for (int stage = 0; stage < w.pipeline_parallel; ++stage) {
    for (const bool forward : {true, false}) {
      OperationProfile op{stage, forward ? InstructionKind::kForward : InstructionKind::kBackward, {}};
      for (const MicrobatchOption& o : microbatch_options(w, partitions, frontiers, stage, forward, method, evaluator)) {
        op.measurements.push_back({fmt::format("{}|schedule={}", o.clock_mhz, schedule_label(o, frontiers, forward, partitions)),
                                   o.clock_mhz, o.time_s, o.energy_j, 0});
      }
      ops.push_back(std::move(op));
    }
  }
  return Profile::from_operations(fmt::format("kareus {} {}", w.model.name, to_string(method)), std::move(ops));
}

std::string profile_csv(const Profile& profile) {
  std::string out = "stage,instruction,frequency,schedule,time,energy\n";
  for (const OperationProfile& op : profile.operations()) {
    for (const perseus::Measurement& m : op.measurements) {
      const std::size_t at = m.knob.find("|schedule=");
      out += fmt::format("{},{},{},{},{:.9f},{:.6f}\n", op.stage, perseus::to_string(op.kind), m.frequency_mhz,
                         at == std::string::npos ? std::string() : m.knob.substr(at + 10), m.time_s, m.energy_j);
    }
  }
  return out;
}

SolveRequest iteration_request(const Workload& w, const Profile& profile) {
  SolveRequest request;
  request.schedule = {ScheduleKind::k1F1B, w.pipeline_parallel, w.microbatches, 1, false};
  double spread = std::numeric_limits<double>::infinity();
  for (const OperationProfile& op : profile.operations()) {
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    for (const perseus::Measurement& m : op.measurements) lo = std::min(lo, m.time_s), hi = std::max(hi, m.time_s);
    if (hi - lo >= kSameOptionTime_s) spread = std::min(spread, hi - lo);
  }
  request.options.unit_time = std::isfinite(spread) ? std::clamp(spread / 20.0, 1e-6, 1e-3) : 1e-3;
  request.options.p_blocking = w.gpu.p_blocking_w;
  return request;
}

Comparison compare(const Workload& w, std::span<const Partition> partitions,
                   std::span<const PartitionFrontier> frontiers, Evaluator& evaluator,
                   const std::function<void(const std::string&)>& progress) {
  Comparison out;
  for (const Method method : kMethods) {
    if (progress) progress(fmt::format("{}: composing and solving the iteration frontier", to_string(method)));
    const Profile profile = method_profile(w, partitions, frontiers, method, evaluator);
    const SolveRequest request = iteration_request(w, profile);
    MethodResult r{method, solve(profile, request), 0.0, 0.0, 0.0};
    r.fastest_time_s = r.solution.frontier.t_min_point().measured.time_s;
    r.fastest_energy_j = r.solution.frontier.t_min_point().measured.energy_j;
    r.least_energy_j = std::numeric_limits<double>::infinity();
    for (const FrontierPoint& p : r.solution.frontier.points) r.least_energy_j = std::min(r.least_energy_j, p.measured.energy_j);
    out.methods.push_back(std::move(r));
  }
  const MethodResult& megatron = out.methods[0];
  const MethodResult& mp = out.methods[1];
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const MethodResult& r : out.methods) {
    out.time_reduction.push_back(1.0 - r.fastest_time_s / megatron.fastest_time_s);
    out.energy_reduction.push_back(1.0 - r.fastest_energy_j / megatron.fastest_energy_j);
    double within_time = std::numeric_limits<double>::infinity(), within_energy = within_time;
    for (const FrontierPoint& p : r.solution.frontier.points) {
      if (p.measured.time_s <= mp.fastest_time_s * (1 + 1e-12)) within_time = std::min(within_time, p.measured.energy_j);
      if (p.measured.energy_j <= mp.least_energy_j * (1 + 1e-12)) within_energy = std::min(within_energy, p.measured.time_s);
    }
    // The M+P point of least energy is its slowest useful one; its time is the reference.
    double mp_least_time = mp.fastest_time_s;
    for (const FrontierPoint& p : mp.solution.frontier.points) {
      if (p.measured.energy_j <= mp.least_energy_j * (1 + 1e-12)) mp_least_time = p.measured.time_s;
    }
    out.iso_time_energy_reduction.push_back(std::isfinite(within_time) ? 1.0 - within_time / mp.fastest_energy_j : nan);
    out.iso_energy_time_reduction.push_back(std::isfinite(within_energy) ? 1.0 - within_energy / mp_least_time : nan);
  }
  return out;
}

}  // namespace perseus::kareus
