#include "perseus/geo/wan.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace perseus::geo {

double TcpModel::mbps(double latency_ms) const {
  // A connection with no latency is limited by the pair's cap, not by its window.
  if (latency_ms <= 0.0) return 1e12;
  return coefficient_mbps * std::pow(latency_ms, -exponent);
}

const std::vector<TcpSample>& tcp_table() {
  static const std::vector<TcpSample> table = {{10, 1220}, {20, 600}, {30, 396}, {40, 293}};
  return table;
}

TcpModel fit_tcp_model(const std::vector<TcpSample>& samples) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const TcpSample& s : samples) {
    if (!(s.latency_ms > 0.0) || !(s.mbps > 0.0) || !std::isfinite(s.latency_ms) || !std::isfinite(s.mbps))
      throw InputError(fmt::format("TCP sample ({} ms, {} Mbps): latency and bandwidth must be positive",
                                   s.latency_ms, s.mbps));
    const double x = std::log(s.latency_ms), y = std::log(s.mbps);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double n = static_cast<double>(samples.size());
  const double denominator = n * sxx - sx * sx;
  if (samples.size() < 2 || std::abs(denominator) < 1e-12)
    throw InputError("TCP samples: need at least two distinct latencies to fit bandwidth against latency");
  const double slope = (n * sxy - sx * sy) / denominator;
  const double intercept = (sy - slope * sx) / n;
  return TcpModel{std::exp(intercept), -slope};
}

const TcpModel& tcp_fit() {
  static const TcpModel model = fit_tcp_model(tcp_table());
  return model;
}

double NetworkSpec::wan_pair_bandwidth() const {
  const double mbps = std::min(connections * tcp.mbps(wan_latency_ms), pair_cap_gbps * 1e3);
  return mbps * 1e6 / 8.0;
}

double NetworkSpec::pair_bandwidth(int from, int to) const {
  return from == to ? intra_dc_gbps * 1e9 / 8.0 : wan_pair_bandwidth();
}

double NetworkSpec::latency_s(int from, int to) const {
  return (from == to ? intra_dc_latency_ms : wan_latency_ms) * 1e-3;
}

int NetworkSpec::total_gpus() const {
  int total = 0;
  for (const DataCenter& dc : dcs) total += dc.gpus;
  return total;
}

void validate(const NetworkSpec& network) {
  if (network.dcs.empty()) throw InputError("--dcs: no datacenter given");
  for (std::size_t i = 0; i < network.dcs.size(); ++i)
    if (network.dcs[i].gpus <= 0)
      throw InputError(fmt::format("--dcs: datacenter {} ({}) has {} GPUs; every DC needs at least one", i + 1,
                                   network.dcs[i].name, network.dcs[i].gpus));
  auto check_nonnegative = [](double value, const char* what) {
    if (!(value >= 0.0) || !std::isfinite(value))
      throw InputError(fmt::format("{} must be zero or more, got {}", what, value));
  };
  auto check_positive = [](double value, const char* what) {
    if (!(value > 0.0) || !std::isfinite(value)) throw InputError(fmt::format("{} must be positive, got {}", what, value));
  };
  check_nonnegative(network.wan_latency_ms, "--latency-ms (WAN latency)");
  check_nonnegative(network.intra_dc_latency_ms, "intra-DC latency");
  check_positive(network.intra_dc_gbps, "--intra-dc-gbps");
  check_positive(network.pair_cap_gbps, "--pair-cap-gbps");
  if (network.connections < 1)
    throw InputError(fmt::format("--connections must be at least 1, got {}", network.connections));
}

std::vector<DataCenter> parse_dcs(const std::string& text) {
  std::vector<DataCenter> dcs;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw InputError(fmt::format("--dcs: entry {} is '{}', expected a GPU count (e.g. --dcs 600,500,400)",
                                   dcs.size() + 1, item));
    if (value <= 0)
      throw InputError(fmt::format("--dcs: datacenter {} has {} GPUs; every DC needs at least one", dcs.size() + 1, value));
    dcs.push_back({fmt::format("dc{}", dcs.size() + 1), static_cast<int>(value)});
    begin = end + 1;
  }
  return dcs;
}

double ring_allreduce_s(double parameters, int gpus, double bytes_per_s) {
  if (gpus <= 1 || parameters <= 0.0) return 0.0;
  return 4.0 * parameters * (gpus - 1) / (gpus * bytes_per_s);
}

}  // namespace perseus::geo
