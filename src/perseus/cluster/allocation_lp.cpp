#include "perseus/cluster/allocation_lp.hpp"

#include <algorithm>

namespace perseus::cluster {

int scale_of(const ThroughputMatrix& t, const Job& job) { return t.job_types[static_cast<std::size_t>(job.type)].scale_factor; }

double seen(const ThroughputMatrix& t, const Job& job, int j, bool aware) {
  const double v = t.at(job.type, j);
  return aware ? v : (v > 0.0 ? 1.0 : 0.0);
}

double fastest_seen(const ThroughputMatrix& t, const Job& job, bool aware) {
  double fastest = 0.0;
  for (int j = 0; j < t.num_gpu_types(); ++j) fastest = std::max(fastest, seen(t, job, j, aware));
  return fastest;
}

void maximize_work(AllocationLp& a, const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware) {
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    const double fastest = fastest_seen(t, jobs[m], aware);
    a.add_objective(m, [&](const Term& term) { return a.copies[m] * term.seen / fastest; });
  }
}

LinearProgram::Solution spend_the_rest(AllocationLp& a, int objective_variable, const LinearProgram::Solution& first,
                                       const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware) {
  a.lp.set_objective(objective_variable, 0.0);
  a.lp.set_bounds(objective_variable, first.objective * (1.0 - kHold), kInfinity);
  maximize_work(a, jobs, t, aware);
  LinearProgram::Solution second = a.lp.resolve();
  return second.optimal ? second : first;
}

JobClasses group_jobs(const std::vector<Job>& jobs, const std::function<ClassKey(const Job&, std::size_t)>& key) {
  JobClasses out;
  std::map<ClassKey, std::size_t> class_of;
  out.job_class.reserve(jobs.size());
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    const auto [it, added] = class_of.emplace(key(jobs[m], m), out.classes.size());
    if (added) out.classes.push_back(jobs[m]), out.copies.push_back(0.0);
    out.copies[it->second] += 1.0;
    out.job_class.push_back(it->second);
  }
  return out;
}

std::vector<double> normalising_factors(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                                        bool aware) {
  const auto equal = equal_share(jobs, t, workers);
  std::vector<double> out(jobs.size(), 0.0);
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    double normal = 0.0;
    for (int j = 0; j < t.num_gpu_types(); ++j) normal += seen(t, jobs[m], j, aware) * equal[m][static_cast<std::size_t>(j)];
    if (normal > 0.0) out[m] = scale_of(t, jobs[m]) / normal;
  }
  return out;
}

PairTimes spread_pairs(const std::vector<PairGroup>& groups, const std::vector<std::vector<std::size_t>>& members,
                       std::size_t gpu_types) {
  constexpr double kTiny = 1e-12;  // pieces below this are the LP's rounding
  PairTimes out;
  const auto add = [&](std::size_t a, std::size_t b, int gpu, double time) {
    if (a == b || time <= kTiny) return;
    auto [it, added] = out.try_emplace({std::min(a, b), std::max(a, b)}, gpu_types, 0.0);
    it->second[static_cast<std::size_t>(gpu)] += time;
  };
  const auto jobs_of = [&](const std::vector<std::pair<std::size_t, double>>& side) {
    std::vector<std::pair<std::size_t, double>> jobs;
    for (const auto& [row, time] : side)
      for (std::size_t m : members[row]) jobs.emplace_back(m, std::max(0.0, time));
    return jobs;
  };
  for (const PairGroup& g : groups) {
    const auto a = jobs_of(g.side_a);
    if (!g.side_b.empty()) {
      const auto b = jobs_of(g.side_b);
      std::size_t i = 0, k = 0;
      double left_a = a.empty() ? 0.0 : a[0].second, left_b = b.empty() ? 0.0 : b[0].second;
      while (i < a.size() && k < b.size()) {
        const double q = std::min(left_a, left_b);
        add(a[i].first, b[k].first, g.gpu_type, q);
        left_a -= q, left_b -= q;
        if (left_a <= kTiny && ++i < a.size()) left_a = a[i].second;
        if (left_b <= kTiny && ++k < b.size()) left_b = b[k].second;
      }
      continue;
    }
    double total = 0.0;
    for (const auto& [m, time] : a) total += time;
    const double half = total / 2.0;
    // Walk [0, half) with p, and [half, total) with q, in step.
    std::size_t p = 0, q = 0;
    double end_p = a.empty() ? 0.0 : a[0].second, start_q = 0.0;
    while (q < a.size() && start_q + a[q].second <= half) start_q += a[q++].second;
    double end_q = q < a.size() ? start_q + a[q].second : total;
    for (double x = 0.0; x < half - kTiny && p < a.size() && q < a.size();) {
      const double next = std::min({end_p, end_q - half, half});
      add(a[p].first, a[q].first, g.gpu_type, next - x);
      x = next;
      if (end_p <= x + kTiny && ++p < a.size()) end_p += a[p].second;
      if (end_q - half <= x + kTiny && ++q < a.size()) end_q += a[q].second;
    }
  }
  return out;
}


std::vector<AdmittedPair> admitted_pairs(const ThroughputMatrix& t, const std::vector<int>& workers,
                                         const std::map<int, double>& jobs_of_type) {
  std::vector<AdmittedPair> out;
  for (auto it_a = jobs_of_type.begin(); it_a != jobs_of_type.end(); ++it_a) {
    for (auto it_b = it_a; it_b != jobs_of_type.end(); ++it_b) {
      const int a = it_a->first, b = it_b->first;
      const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
      if (scale != t.job_types[static_cast<std::size_t>(b)].scale_factor || (a == b && it_a->second < 2.0)) continue;
      for (int j = 0; j < t.num_gpu_types(); ++j) {
        const double alone_a = t.at(a, j), alone_b = t.at(b, j);
        if (workers[static_cast<std::size_t>(j)] < scale || alone_a <= 0.0 || alone_b <= 0.0) continue;
        const auto speeds = t.shared_speeds(a, b, j);
        if (!speeds || speeds->first <= 0.0 || speeds->second <= 0.0 ||
            speeds->first / alone_a + speeds->second / alone_b <= 1.0 + 1e-9)
          continue;
        out.push_back({a, b, j, speeds->first, speeds->second});
      }
    }
  }
  return out;
}

AllocationLp::AllocationLp(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                           LinearProgram::Sense sense, bool aware, bool space_sharing, std::vector<double> copies_of)
    : lp(sense), copies(std::move(copies_of)) {
    if (copies.empty()) copies.assign(jobs.size(), 1.0);
    const int J = t.num_gpu_types();
    x.assign(jobs.size(), std::vector<int>(static_cast<std::size_t>(J), -1));
    part.assign(jobs.size(), std::vector<double>(static_cast<std::size_t>(J), 0.0));
    job_terms.resize(jobs.size());
    std::vector<std::vector<std::pair<int, double>>> capacity(static_cast<std::size_t>(J));
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      std::vector<int> types;
      double usable = 0.0;
      for (int j = 0; j < J; ++j)
        if (t.at(jobs[m].type, j) > 0.0 && workers[j] >= scale_of(t, jobs[m])) types.push_back(j), usable += workers[j];
      if (types.empty()) continue;
      if (aware) {
        std::vector<std::pair<int, double>> total;
        for (int j : types) {
          x[m][j] = lp.add_variable(0.0, 1.0);
          part[m][j] = 1.0;
          total.emplace_back(x[m][j], 1.0);
        }
        if (!space_sharing) lp.add_row(total, -kInfinity, 1.0);  // with pairs: below, once they are known
      } else {
        const int share = lp.add_variable(0.0, 1.0);
        for (int j : types) x[m][j] = share, part[m][j] = workers[j] / usable;
      }
      for (int j : types) {
        const double speed = t.at(jobs[m].type, j);
        job_terms[m].push_back({x[m][j], j, part[m][j], speed, aware ? speed : 1.0});
        capacity[j].emplace_back(x[m][j], part[m][j] * scale_of(t, jobs[m]) * copies[m]);
      }
    }
    if (space_sharing) {
      std::map<int, std::vector<std::size_t>> rows_of_type;
      std::map<int, double> copies_of_type;
      for (std::size_t m = 0; m < jobs.size(); ++m)
        if (!job_terms[m].empty()) rows_of_type[jobs[m].type].push_back(m), copies_of_type[jobs[m].type] += copies[m];
      for (const AdmittedPair& p : admitted_pairs(t, workers, copies_of_type)) {
        const int a = p.a, b = p.b, j = p.gpu_type;
        const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
        PairVariables group{j, lp.add_variable(0.0, kInfinity), {}, {}};
        capacity[j].emplace_back(group.together, scale);
        // A type with one row (max-min fairness's classes, mostly) needs no w: its w is Z (2 Z
        // when a = b, where copies >= 2 already keeps each job within Z).
        const auto side = [&](const std::vector<std::size_t>& rows, double speed, double sides) {
          std::vector<PairVariables::Side> out;
          if (rows.size() == 1) {
            const std::size_t m = rows.front();
            job_terms[m].push_back({group.together, j, sides / copies[m], speed, speed});
            out.push_back({m, group.together, sides});
            return out;
          }
          std::vector<std::pair<int, double>> sum{{group.together, -sides}};
          for (std::size_t m : rows) {
            const int w = lp.add_variable(0.0, copies[m]);
            job_terms[m].push_back({w, j, 1.0 / copies[m], speed, speed});
            sum.emplace_back(w, 1.0);
            out.push_back({m, w, 1.0});
            if (a == b) lp.add_row({{w, 1.0}, {group.together, -copies[m]}}, -kInfinity, 0.0);
          }
          lp.add_row(sum, 0.0, 0.0);
          return out;
        };
        group.side_a = side(rows_of_type[a], p.speed_a, a == b ? 2.0 : 1.0);
        if (a != b) group.side_b = side(rows_of_type[b], p.speed_b, 1.0);
        pairs.push_back(std::move(group));
      }
      for (std::size_t m = 0; m < jobs.size(); ++m)
        if (!job_terms[m].empty()) lp.add_row(terms(m, [](const Term&) { return 1.0; }), -kInfinity, 1.0);
    }
    for (int j = 0; j < J; ++j)
      if (!capacity[j].empty()) lp.add_row(capacity[j], -kInfinity, workers[j]);
  }

std::vector<std::vector<double>> AllocationLp::shares(const LinearProgram::Solution& s) const {
    std::vector<std::vector<double>> out(x.size(), std::vector<double>(x.empty() ? 0 : x.front().size(), 0.0));
    for (std::size_t m = 0; m < x.size(); ++m)
      for (std::size_t j = 0; j < x[m].size(); ++j)
        if (x[m][j] >= 0) out[m][j] = std::clamp(s.values[static_cast<std::size_t>(x[m][j])] * part[m][j], 0.0, 1.0);
    return out;
  }
  // The rows' shares alone and their space sharing.
Chosen AllocationLp::chosen(const LinearProgram::Solution& s) const {
    Chosen out{shares(s), {}};
    const auto value = [&](int variable) { return s.values[static_cast<std::size_t>(variable)]; };
    for (const PairVariables& p : pairs) {
      if (value(p.together) < kNoPair) continue;
      PairGroup g{p.gpu_type, {}, {}};
      for (const auto& side : p.side_a) g.side_a.emplace_back(side.row, side.factor * value(side.variable) / copies[side.row]);
      for (const auto& side : p.side_b) g.side_b.emplace_back(side.row, side.factor * value(side.variable) / copies[side.row]);
      out.groups.push_back(std::move(g));
    }
    return out;
  }

}  // namespace perseus::cluster
