#include "perseus/cluster/rounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {

RoundScheduler::RoundScheduler(std::vector<int> workers, int gpus_per_server)
    : workers_(std::move(workers)), gpus_per_server_(gpus_per_server) {
  if (gpus_per_server_ < 1) throw InputError(fmt::format("{} GPUs per server: must be at least 1", gpus_per_server_));
  for (int w : workers_)
    if (w < 0) throw InputError(fmt::format("{} GPUs of a type: must be zero or more", w));
}

void RoundScheduler::set_allocation(std::vector<int> ids, std::vector<int> scale_factors,
                                    std::vector<std::vector<double>> share) {
  if (ids.size() != scale_factors.size() || ids.size() != share.size())
    throw InputError(fmt::format("{} job ids, {} scale factors and {} allocation rows", ids.size(), scale_factors.size(), share.size()));
  for (const auto& row : share)
    if (row.size() != workers_.size())
      throw InputError(fmt::format("an allocation row has {} GPU types, the cluster {}", row.size(), workers_.size()));
  if (!std::is_sorted(ids.begin(), ids.end()) || std::adjacent_find(ids.begin(), ids.end()) != ids.end())
    throw InputError("job ids must be distinct and ascending");
  // Carry each continuing job's history over (both id lists ascending: one merge).
  const std::size_t J = workers_.size();
  std::vector<double> entitled(ids.size() * J, 0.0), received(ids.size() * J, 0.0);
  for (std::size_t i = 0, old = 0; i < ids.size(); ++i) {
    while (old < ids_.size() && ids_[old] < ids[i]) ++old;
    if (old == ids_.size() || ids_[old] != ids[i]) continue;
    std::copy_n(entitled_total_s_.begin() + static_cast<std::ptrdiff_t>(old * J), J, entitled.begin() + static_cast<std::ptrdiff_t>(i * J));
    std::copy_n(received_total_s_.begin() + static_cast<std::ptrdiff_t>(old * J), J, received.begin() + static_cast<std::ptrdiff_t>(i * J));
  }
  entitled_total_s_ = std::move(entitled);
  received_total_s_ = std::move(received);
  ids_ = std::move(ids);
  scale_ = std::move(scale_factors);
  share_ = std::move(share);
  received_s_.assign(ids_.size() * J, 0.0);
  elapsed_s_ = 0.0;
}

std::size_t RoundScheduler::row_of(int id) const {
  const auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  return it != ids_.end() && *it == id ? static_cast<std::size_t>(it - ids_.begin()) : ids_.size();
}

namespace {

constexpr double kNoShare = 1e-6;  // an X below this is the LP's rounding, not an allocation

struct Candidate {
  double priority, entitled, share;
  int row, gpu_type, id;
};

}  // namespace

std::vector<Lease> RoundScheduler::next_round() {
  const int J = static_cast<int>(workers_.size());
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < ids_.size(); ++i)
    for (int j = 0; j < J; ++j) {
      const double x = share_[i][j];
      if (x < kNoShare || scale_[i] > workers_[j]) continue;
      const double entitled = entitled_total_s_[i * workers_.size() + j], received = received_total_s_[i * workers_.size() + j];
      const double priority = received > 0.0 ? entitled / received : std::numeric_limits<double>::infinity();
      candidates.push_back({priority, entitled, x, static_cast<int>(i), j, ids_[i]});
    }
  // A heap, popped only until the GPUs run out: O(M J + leases log(M J)) rather than a full sort.
  const auto lower = [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.entitled != b.entitled) return a.entitled < b.entitled;
    if (a.share != b.share) return a.share < b.share;
    return a.id > b.id;
  };
  std::make_heap(candidates.begin(), candidates.end(), lower);

  // Algorithm 2: the highest priority first, one lease per job, while GPUs of the type are free.
  std::vector<int> free = workers_;
  int free_total = std::accumulate(free.begin(), free.end(), 0);
  std::vector<char> picked(ids_.size(), 0);
  std::vector<Lease> leases;
  std::vector<int> lease_scale;
  for (auto end = candidates.end(); end != candidates.begin() && free_total > 0; --end) {
    std::pop_heap(candidates.begin(), end, lower);
    const Candidate& c = *(end - 1);
    if (picked[c.row] || scale_[c.row] > free[c.gpu_type]) continue;
    picked[c.row] = 1;
    free[c.gpu_type] -= scale_[c.row];
    free_total -= scale_[c.row];
    leases.push_back({c.id, c.gpu_type, {}, false, true});
    lease_scale.push_back(scale_[c.row]);
  }

  // Placement. Renewals first: a job on the type it held keeps its GPUs.
  std::vector<std::vector<char>> busy(workers_.size());
  for (int j = 0; j < J; ++j) busy[j].assign(static_cast<std::size_t>(workers_[j]), 0);
  std::unordered_map<int, const Lease*> held;
  for (const Lease& l : previous_) held.emplace(l.job, &l);
  std::vector<std::size_t> unplaced;
  for (std::size_t k = 0; k < leases.size(); ++k) {
    Lease& l = leases[k];
    const auto it = held.find(l.job);
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
    const std::size_t row = row_of(leases[k].job);
    if (row == ids_.size()) continue;
    received_s_[row * J + leases[k].gpu_type] += ran_s[k];
    received_total_s_[row * J + leases[k].gpu_type] += ran_s[k];
  }
  for (std::size_t i = 0; i < ids_.size(); ++i)
    for (std::size_t j = 0; j < J; ++j) entitled_total_s_[i * J + j] += share_[i][j] * round_s;
  elapsed_s_ += round_s;
  previous_ = leases;
}

std::vector<std::vector<double>> RoundScheduler::received_share() const {
  const std::size_t J = workers_.size();
  std::vector<std::vector<double>> f(ids_.size(), std::vector<double>(J, 0.0));
  for (std::size_t i = 0; i < ids_.size(); ++i)
    for (std::size_t j = 0; j < J; ++j) f[i][j] = elapsed_s_ > 0.0 ? received_s_[i * J + j] / elapsed_s_ : 0.0;
  return f;
}

double RoundScheduler::allocation_gap() const {
  if (ids_.empty() || elapsed_s_ <= 0.0) return 0.0;
  const std::size_t J = workers_.size();
  double sum = 0.0;
  for (std::size_t i = 0; i < ids_.size(); ++i)
    for (std::size_t j = 0; j < J; ++j) sum += std::abs(received_s_[i * J + j] / elapsed_s_ - share_[i][j]);
  return sum / static_cast<double>(ids_.size());
}

}  // namespace perseus::cluster
