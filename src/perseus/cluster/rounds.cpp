#include "perseus/cluster/rounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {

void check_workers(const std::vector<int>& workers, int gpus_per_server) {
  if (gpus_per_server < 1) throw InputError(fmt::format("{} GPUs per server: must be at least 1", gpus_per_server));
  for (int w : workers)
    if (w < 0) throw InputError(fmt::format("{} GPUs of a type: must be zero or more", w));
}

void check_round_length(double round_s) {
  if (!(round_s > 0.0) || !std::isfinite(round_s))
    throw InputError(fmt::format("round length {} s: must be a number > 0", round_s));
}

RoundScheduler::RoundScheduler(std::vector<int> workers, int gpus_per_server)
    : workers_(std::move(workers)), gpus_per_server_(gpus_per_server) {
  check_workers(workers_, gpus_per_server_);
}

void RoundScheduler::set_workers(std::vector<int> workers, int gpus_per_server) {
  check_workers(workers, gpus_per_server);
  if (workers.size() != workers_.size())
    throw InputError(fmt::format("the cluster had {} GPU types, now {}", workers_.size(), workers.size()));
  workers_ = std::move(workers);
  gpus_per_server_ = gpus_per_server;
  previous_.clear();
}

namespace {

bool before(const Combination& a, const Combination& b) { return std::tie(a.job, a.partner) < std::tie(b.job, b.partner); }

}  // namespace

void RoundScheduler::set_allocation(std::vector<Combination> combinations) {
  for (std::size_t i = 0; i < combinations.size(); ++i) {
    const Combination& c = combinations[i];
    if (c.share.size() != workers_.size())
      throw InputError(fmt::format("the allocation of job {} has {} GPU types, the cluster {}", c.job, c.share.size(), workers_.size()));
    if (c.partner >= 0 && c.partner <= c.job)
      throw InputError(fmt::format("job {} paired with job {}: the partner's id must be the larger", c.job, c.partner));
    if (c.scale_factor < 1) throw InputError(fmt::format("job {}: scale factor {} must be at least 1", c.job, c.scale_factor));
    if (i > 0 && !before(combinations[i - 1], c))
      throw InputError("job ids must be distinct and ascending (combinations sorted by job, then partner)");
  }
  // Carry each continuing combination's history over (both lists sorted: one merge).
  const std::size_t J = workers_.size();
  std::vector<double> entitled(combinations.size() * J, 0.0), received(combinations.size() * J, 0.0);
  for (std::size_t i = 0, old = 0; i < combinations.size(); ++i) {
    while (old < combinations_.size() && before(combinations_[old], combinations[i])) ++old;
    if (old == combinations_.size() || before(combinations[i], combinations_[old])) continue;
    std::copy_n(entitled_total_s_.begin() + static_cast<std::ptrdiff_t>(old * J), J, entitled.begin() + static_cast<std::ptrdiff_t>(i * J));
    std::copy_n(received_total_s_.begin() + static_cast<std::ptrdiff_t>(old * J), J, received.begin() + static_cast<std::ptrdiff_t>(i * J));
  }
  entitled_total_s_ = std::move(entitled);
  received_total_s_ = std::move(received);
  combinations_ = std::move(combinations);
  // The jobs: the combinations' first jobs come sorted; partners (space sharing only) are merged in.
  jobs_.clear();
  std::vector<int> partners;
  for (const Combination& c : combinations_) {
    if (jobs_.empty() || jobs_.back() != c.job) jobs_.push_back(c.job);
    if (c.partner >= 0) partners.push_back(c.partner);
  }
  if (!partners.empty()) {
    std::sort(partners.begin(), partners.end());
    const std::size_t middle = jobs_.size();
    jobs_.insert(jobs_.end(), partners.begin(), partners.end());
    std::inplace_merge(jobs_.begin(), jobs_.begin() + static_cast<std::ptrdiff_t>(middle), jobs_.end());
    jobs_.erase(std::unique(jobs_.begin(), jobs_.end()), jobs_.end());
  }
  const auto slot = [&](int id) { return static_cast<int>(std::lower_bound(jobs_.begin(), jobs_.end(), id) - jobs_.begin()); };
  slots_.clear();
  for (const Combination& c : combinations_) slots_.emplace_back(slot(c.job), c.partner >= 0 ? slot(c.partner) : -1);
  received_s_.assign(combinations_.size() * J, 0.0);
  elapsed_s_ = 0.0;
}

std::size_t RoundScheduler::row_of(int job, int partner) const {
  const Combination key{job, partner, 1, {}};
  const auto it = std::lower_bound(combinations_.begin(), combinations_.end(), key, before);
  return it != combinations_.end() && !before(key, *it) ? static_cast<std::size_t>(it - combinations_.begin()) : combinations_.size();
}

namespace {

constexpr double kNoShare = 1e-6;  // an X below this is the LP's rounding, not an allocation

struct Candidate {
  double priority, entitled, share;
  int row, gpu_type;  // rows are in (job, partner) order: the last tie-break
};

}  // namespace

std::vector<Lease> RoundScheduler::next_round() {
  const int J = static_cast<int>(workers_.size());
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < combinations_.size(); ++i)
    for (int j = 0; j < J; ++j) {
      const Combination& c = combinations_[i];
      const double x = c.share[j];
      if (x < kNoShare || c.scale_factor > workers_[j]) continue;
      const double entitled = entitled_total_s_[i * workers_.size() + j], received = received_total_s_[i * workers_.size() + j];
      const double priority = received > 0.0 ? entitled / received : std::numeric_limits<double>::infinity();
      candidates.push_back({priority, entitled, x, static_cast<int>(i), j});
    }
  // A heap, popped only until the GPUs run out: O(M J + leases log(M J)) rather than a full sort.
  const auto lower = [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.entitled != b.entitled) return a.entitled < b.entitled;
    if (a.share != b.share) return a.share < b.share;
    return a.row > b.row;
  };
  std::make_heap(candidates.begin(), candidates.end(), lower);

  // Algorithm 2: the highest priority first, one lease per job, while GPUs of the type are free.
  std::vector<int> free = workers_;
  int free_total = std::accumulate(free.begin(), free.end(), 0);
  std::vector<char> picked(jobs_.size(), 0);  // by job: one combination holding it per round
  std::vector<Lease> leases;
  std::vector<int> lease_scale;
  for (auto end = candidates.end(); end != candidates.begin() && free_total > 0; --end) {
    std::pop_heap(candidates.begin(), end, lower);
    const Candidate& c = *(end - 1);
    const auto [first, second] = slots_[c.row];
    const Combination& combination = combinations_[c.row];
    const int scale = combination.scale_factor;
    if (picked[first] || (second >= 0 && picked[second]) || scale > free[c.gpu_type]) continue;
    picked[first] = 1;
    if (second >= 0) picked[second] = 1;
    free[c.gpu_type] -= scale;
    free_total -= scale;
    leases.push_back({combination.job, c.gpu_type, {}, false, true, combination.partner});
    lease_scale.push_back(scale);
  }

  // Placement. Renewals first: a job on the type it held keeps its GPUs.
  std::vector<std::vector<char>> busy(workers_.size());
  for (int j = 0; j < J; ++j) busy[j].assign(static_cast<std::size_t>(workers_[j]), 0);
  std::map<std::pair<int, int>, const Lease*> held;
  for (const Lease& l : previous_) held.emplace(std::make_pair(l.job, l.partner), &l);
  std::vector<std::size_t> unplaced;
  for (std::size_t k = 0; k < leases.size(); ++k) {
    Lease& l = leases[k];
    const auto it = held.find({l.job, l.partner});
    if (it != held.end() && it->second->gpu_type == l.gpu_type) {
      l.gpus = it->second->gpus;
      l.renewed = true;
      l.consolidated = it->second->consolidated;
      for (int g : l.gpus) busy[l.gpu_type][g] = 1;
    } else {
      unplaced.push_back(k);
    }
  }
  // The rest in decreasing scale factor: best fit on one server, else the emptiest servers.
  std::stable_sort(unplaced.begin(), unplaced.end(), [&](std::size_t a, std::size_t b) { return lease_scale[a] > lease_scale[b]; });
  for (std::size_t k : unplaced) {
    Lease* l = &leases[k];
    const int j = l->gpu_type, need = lease_scale[k];
    const int servers = (workers_[j] + gpus_per_server_ - 1) / gpus_per_server_;
    std::vector<int> free_on(static_cast<std::size_t>(servers), 0);
    for (int g = 0; g < workers_[j]; ++g) free_on[g / gpus_per_server_] += busy[j][g] ? 0 : 1;
    int best = -1;
    for (int s = 0; s < servers; ++s)
      if (free_on[s] >= need && (best < 0 || free_on[s] < free_on[best])) best = s;
    std::vector<int> order;
    if (best >= 0) {
      order.push_back(best);
    } else {
      order.resize(static_cast<std::size_t>(servers));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return free_on[a] > free_on[b]; });
    }
    for (int s : order)
      for (int g = s * gpus_per_server_; g < std::min(workers_[j], (s + 1) * gpus_per_server_) && static_cast<int>(l->gpus.size()) < need; ++g)
        if (!busy[j][g]) busy[j][g] = 1, l->gpus.push_back(g);
    l->consolidated = best >= 0;
  }
  return leases;
}

void RoundScheduler::finish_round(const std::vector<Lease>& leases, const std::vector<double>& ran_s, double round_s) {
  if (ran_s.size() != leases.size())
    throw InputError(fmt::format("{} leases and {} run times", leases.size(), ran_s.size()));
  const std::size_t J = workers_.size();
  for (std::size_t k = 0; k < leases.size(); ++k) {
    const std::size_t row = row_of(leases[k].job, leases[k].partner);
    if (row == combinations_.size()) continue;
    received_s_[row * J + leases[k].gpu_type] += ran_s[k];
    received_total_s_[row * J + leases[k].gpu_type] += ran_s[k];
  }
  for (std::size_t i = 0; i < combinations_.size(); ++i)
    for (std::size_t j = 0; j < J; ++j) entitled_total_s_[i * J + j] += combinations_[i].share[j] * round_s;
  elapsed_s_ += round_s;
  previous_ = leases;
}

std::vector<std::vector<double>> RoundScheduler::received_share() const {
  const std::size_t J = workers_.size();
  std::vector<std::vector<double>> f(combinations_.size(), std::vector<double>(J, 0.0));
  for (std::size_t i = 0; i < combinations_.size(); ++i)
    for (std::size_t j = 0; j < J; ++j) f[i][j] = elapsed_s_ > 0.0 ? received_s_[i * J + j] / elapsed_s_ : 0.0;
  return f;
}

double RoundScheduler::allocation_gap() const {
  if (jobs_.empty() || elapsed_s_ <= 0.0) return 0.0;
  const std::size_t J = workers_.size();
  // Per job: X and f summed over its combinations.
  std::vector<double> allocated(jobs_.size() * J, 0.0), realised(jobs_.size() * J, 0.0);
  for (std::size_t i = 0; i < combinations_.size(); ++i)
    for (const int slot : {slots_[i].first, slots_[i].second}) {
      if (slot < 0) continue;
      for (std::size_t j = 0; j < J; ++j) {
        allocated[slot * J + j] += combinations_[i].share[j];
        realised[slot * J + j] += received_s_[i * J + j] / elapsed_s_;
      }
    }
  double sum = 0.0;
  for (std::size_t k = 0; k < allocated.size(); ++k) sum += std::abs(realised[k] - allocated[k]);
  return sum / static_cast<double>(jobs_.size());
}

}  // namespace perseus::cluster
