#include "perseus/server/metrics.hpp"

#include <fmt/format.h>

namespace perseus::server {

std::size_t Histogram::bucket_of(double seconds) {
  std::size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  return i;
}

void Histogram::observe(double seconds) {
  ++buckets_[bucket_of(seconds)];
  ++count_;
  sum_ += seconds;
}

void AtomicHistogram::observe(double seconds) {
  buckets_[Histogram::bucket_of(seconds)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(seconds, std::memory_order_relaxed);
}

Histogram AtomicHistogram::snapshot() const {
  std::array<std::uint64_t, Histogram::kBounds.size() + 1> buckets{};
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    count += buckets[i];  // consistent with the buckets, whatever observe() runs meanwhile
  }
  return Histogram(buckets, count, sum_.load(std::memory_order_relaxed));
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, labels, kBounds[i], cumulative);
  }
  cumulative += buckets_.back();
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, labels, cumulative);
  const std::string bare = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, bare, sum_, name, bare, count_);
}

double Histogram::quantile_bound(double q) const {
  if (count_ == 0) return 0.0;
  const double target = q * static_cast<double>(count_);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    if (static_cast<double>(cumulative) >= target) return kBounds[i];
  }
  return kBounds.back() * 2;
}

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::size_t> Metrics::known_route(std::string_view route) {
  for (std::size_t i = 0; i < kRoutes.size(); ++i) {
    if (kRoutes[i] == route) return i;
  }
  return std::nullopt;
}

void Metrics::record_request(std::string_view route, int status, double seconds) {
  const std::optional<std::size_t> known = known_route(route);
  if (known) {
    known_latency_[*known].observe(seconds);
    if (status == 200) {
      ok_requests_[*known].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(route), status}];
  if (!known) latency_[std::string(route)].observe(seconds);
}

void Metrics::record_frontier(bool ok, double seconds) {
  std::lock_guard lock(mutex_);
  ++(ok ? frontier_ok_ : frontier_failed_);
  if (ok) frontier_seconds_.observe(seconds);
}

void Metrics::record_straggler_replan(double seconds) {
  std::lock_guard lock(mutex_);
  straggler_replan_.observe(seconds);
}

void Metrics::record_barrier_release(double seconds) {
  std::lock_guard lock(mutex_);
  barrier_wait_.observe(seconds);
}

std::uint64_t Metrics::requests(std::string_view route, int status) const {
  const std::optional<std::size_t> known = known_route(route);
  if (known && status == 200) return ok_requests_[*known].load(std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  const auto it = requests_.find({std::string(route), status});
  return it == requests_.end() ? 0 : it->second;
}

std::uint64_t Metrics::frontier_computations(bool ok) const {
  std::lock_guard lock(mutex_);
  return ok ? frontier_ok_ : frontier_failed_;
}

Histogram Metrics::straggler_replan() const {
  std::lock_guard lock(mutex_);
  return straggler_replan_;
}

std::string Metrics::render(const std::vector<std::pair<std::string, std::pair<std::string, double>>>& gauges) const {
  std::string out;
  for (const auto& [name, help_value] : gauges) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help_value.first, name, name, help_value.second);
  }
  std::lock_guard lock(mutex_);
  // Sorted by route and status, the lock-free counts among the others.
  std::map<std::pair<std::string, int>, std::uint64_t> requests = requests_;
  std::map<std::string, Histogram> latency = latency_;
  for (std::size_t i = 0; i < kRoutes.size(); ++i) {
    if (const std::uint64_t ok = ok_requests_[i].load(std::memory_order_relaxed)) requests[{std::string(kRoutes[i]), 200}] = ok;
    Histogram histogram = known_latency_[i].snapshot();
    if (histogram.count() > 0) latency[std::string(kRoutes[i])] = histogram;
  }
  out += "# HELP perseus_http_requests_total HTTP requests by route and status.\n";
  out += "# TYPE perseus_http_requests_total counter\n";
  for (const auto& [key, count] : requests) {
    out += fmt::format("perseus_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", escape_label(key.first),
                       key.second, count);
  }
  out += "# HELP perseus_http_request_duration_seconds Time from request to response, by route.\n";
  out += "# TYPE perseus_http_request_duration_seconds histogram\n";
  for (const auto& [route, histogram] : latency) {
    histogram.render(out, "perseus_http_request_duration_seconds", fmt::format("route=\"{}\",", escape_label(route)));
  }
  out += "# HELP perseus_frontier_computations_total Frontier computations by outcome.\n";
  out += "# TYPE perseus_frontier_computations_total counter\n";
  out += fmt::format("perseus_frontier_computations_total{{outcome=\"ok\"}} {}\n", frontier_ok_);
  out += fmt::format("perseus_frontier_computations_total{{outcome=\"failed\"}} {}\n", frontier_failed_);
  out += "# HELP perseus_frontier_computation_seconds Time to compute a job's frontier.\n";
  out += "# TYPE perseus_frontier_computation_seconds histogram\n";
  frontier_seconds_.render(out, "perseus_frontier_computation_seconds", "");
  out += "# HELP perseus_straggler_replan_seconds Server time from a straggler notice to its plan being ready.\n";
  out += "# TYPE perseus_straggler_replan_seconds histogram\n";
  straggler_replan_.render(out, "perseus_straggler_replan_seconds", "");
  out += "# HELP perseus_schedule_barrier_seconds Time from a round's first schedule request to its release.\n";
  out += "# TYPE perseus_schedule_barrier_seconds histogram\n";
  barrier_wait_.render(out, "perseus_schedule_barrier_seconds", "");
  return out;
}

}  // namespace perseus::server
