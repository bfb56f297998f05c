// Request counts, latency histograms and event counters, rendered in the Prometheus text
// exposition format (version 0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace perseus::server {

// A cumulative histogram with fixed upper bounds (seconds), plus sum and count.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                     0.025,  0.05,    0.1,    0.25,  1.0,    5.0,   30.0};
  Histogram() = default;
  // From counts taken elsewhere (an AtomicHistogram's snapshot).
  Histogram(const std::array<std::uint64_t, kBounds.size() + 1>& buckets, std::uint64_t count, double sum)
      : buckets_(buckets), count_(count), sum_(sum) {}
  // The bucket a value falls in.
  static std::size_t bucket_of(double seconds);
  void observe(double seconds);
  // Prometheus lines for metric `name` with extra labels `labels` ("" or `a="b",`).
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  std::uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  // Upper bound of the bucket holding quantile q (an estimate at bucket resolution).
  double quantile_bound(double q) const;

 private:
  std::array<std::uint64_t, kBounds.size() + 1> buckets_{};  // last: +Inf
  std::uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Histogram's counts in relaxed atomics: observed from every event loop at once without a
// lock (each count exact; a snapshot taken while others observe may be a request behind).
class AtomicHistogram {
 public:
  void observe(double seconds);
  Histogram snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, Histogram::kBounds.size() + 1> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

// Thread-safe. Requests to the routes the server knows (kRoutes) that succeed (200) are
// counted in atomics, without a lock: the event loops record every GET /schedule and
// POST /result, and one mutex shared by all of them was a point of contention. The rest
// (other statuses, other route labels, the other events) take the mutex.
class Metrics {
 public:
  // The route labels counted without a lock (Service::route_label's).
  static constexpr std::array<std::string_view, 12> kRoutes = {
      "/",           "/healthz", "/info", "/metrics", "/api/jobs", "/register_job", "/straggler", "/register_rank/{job_id}",
      "/schedule/{job_id}", "/result/{job_id}", "/profile/{job_id}", "other"};

  void record_request(std::string_view route, int status, double seconds);
  void record_frontier(bool ok, double seconds);
  void record_straggler_replan(double seconds);
  void record_barrier_release(double seconds);

  // `gauges`: name -> (help, value) rendered as gauges before the counters.
  std::string render(const std::vector<std::pair<std::string, std::pair<std::string, double>>>& gauges) const;

  std::uint64_t requests(std::string_view route, int status) const;
  std::uint64_t frontier_computations(bool ok) const;
  Histogram straggler_replan() const;

 private:
  static std::optional<std::size_t> known_route(std::string_view route);

  std::array<std::atomic<std::uint64_t>, kRoutes.size()> ok_requests_{};  // status 200, per known route
  std::array<AtomicHistogram, kRoutes.size()> known_latency_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // the rest
  std::map<std::string, Histogram> latency_;                        // routes not in kRoutes
  std::uint64_t frontier_ok_ = 0;
  std::uint64_t frontier_failed_ = 0;
  Histogram frontier_seconds_;
  Histogram straggler_replan_;
  Histogram barrier_wait_;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string escape_label(const std::string& value);

}  // namespace perseus::server
