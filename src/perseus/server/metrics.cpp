#include "perseus/server/metrics.hpp"

#include <fmt/format.h>

namespace perseus::server {

void Histogram::observe(double seconds) {
  std::size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++buckets_[i];
  ++count_;
  sum_ += seconds;
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

void Metrics::record_request(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
  latency_[route].observe(seconds);
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

std::uint64_t Metrics::requests(const std::string& route, int status) const {
  std::lock_guard lock(mutex_);
  const auto it = requests_.find({route, status});
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
  out += "# HELP perseus_http_requests_total HTTP requests by route and status.\n";
  out += "# TYPE perseus_http_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += fmt::format("perseus_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", escape_label(key.first),
                       key.second, count);
  }
  out += "# HELP perseus_http_request_duration_seconds Time from request to response, by route.\n";
  out += "# TYPE perseus_http_request_duration_seconds histogram\n";
  for (const auto& [route, histogram] : latency_) {
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
