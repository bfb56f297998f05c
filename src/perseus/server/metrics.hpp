// Request counts, latency histograms and event counters, rendered in the Prometheus text
// exposition format (version 0.0.4).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace perseus::server {

// A cumulative histogram with fixed upper bounds (seconds), plus sum and count.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                     0.025,  0.05,    0.1,    0.25,  1.0,    5.0,   30.0};
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

class Metrics {
 public:
  void record_request(const std::string& route, int status, double seconds);
  void record_frontier(bool ok, double seconds);
  void record_straggler_replan(double seconds);
  void record_barrier_release(double seconds);

  // `gauges`: name -> (help, value) rendered as gauges before the counters.
  std::string render(const std::vector<std::pair<std::string, std::pair<std::string, double>>>& gauges) const;

  std::uint64_t requests(const std::string& route, int status) const;
  std::uint64_t frontier_computations(bool ok) const;
  Histogram straggler_replan() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  std::uint64_t frontier_ok_ = 0;
  std::uint64_t frontier_failed_ = 0;
  Histogram frontier_seconds_;
  Histogram straggler_replan_;
  Histogram barrier_wait_;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string escape_label(const std::string& value);

}  // namespace perseus::server
