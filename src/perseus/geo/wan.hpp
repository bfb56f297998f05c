// The network of geo-distributed training (docs/geo.md, "The network"): datacenters with GPU
// counts, fast links inside a datacenter and a WAN between them whose per-node-pair bandwidth
// depends on how many TCP connections the pair opens and on the latency.
//
// One TCP connection's throughput falls with the round trip (window / RTT). Atlas's Table 1
// measures it at one-way latencies of 10, 20, 30 and 40 ms: 1,220, 600, 396 and 293 Mbps. We
// fit a power law bw(l) = a * l^-b by least squares on log-log (tcp_fit()): b comes out
// 1.03, i.e. almost exactly 1/RTT, and the fit is within 2% of every measured row. N connections
// of one node pair add up until the pair's cap (5 Gbps on Azure and AWS, a hypervisor limit):
//   pair_bandwidth = min(N * bw(l), cap).
// Sizes and times: an activation or gradient is B * L * H * 2 bytes (fp16); a ring all-reduce
// of P parameters (fp16) over N GPUs at bandwidth BW takes 4 * P * (N - 1) / (N * BW).
#pragma once

#include <string>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::geo {

// Throughput of one TCP connection against the one-way latency: a * latency_ms^-exponent, Mbps.
struct TcpModel {
  double coefficient_mbps = 0.0;  // a
  double exponent = 1.0;          // b
  double mbps(double latency_ms) const;
};

// The least-squares fit on log-log of Atlas's Table 1 (tcp_table()).
struct TcpSample {
  double latency_ms = 0.0;
  double mbps = 0.0;
};
const std::vector<TcpSample>& tcp_table();
// Fits a * l^-b to `samples` (at least two distinct latencies, every value positive): O(n).
// Throws InputError otherwise.
TcpModel fit_tcp_model(const std::vector<TcpSample>& samples);
// The fit of tcp_table(), computed once.
const TcpModel& tcp_fit();

// A datacenter taking part in training.
struct DataCenter {
  std::string name;
  int gpus = 0;
};

struct NetworkSpec {
  std::vector<DataCenter> dcs;
  double intra_dc_gbps = 100.0;   // between two nodes of one DC (InfiniBand)
  double intra_dc_latency_ms = 0.0;
  double wan_latency_ms = 20.0;   // one way, between any two DCs
  int connections = 1;            // TCP connections per node pair across the WAN
  double pair_cap_gbps = 5.0;     // what a node pair gets across the WAN, however many connections
  TcpModel tcp = tcp_fit();

  // Bytes per second between a node of DC `from` and one of DC `to` (same DC: intra).
  double pair_bandwidth(int from, int to) const;
  double latency_s(int from, int to) const;
  double wan_pair_bandwidth() const;  // min(connections * tcp(latency), cap), B/s
  int total_gpus() const;
};

// Throws InputError naming the field: no DC, a DC with no GPUs (or a negative count), a negative
// or non-finite latency, bandwidths or caps not positive, connections below 1.
void validate(const NetworkSpec& network);

// Parses "600,500,400" into DCs named dc1, dc2, ...; InputError naming the bad entry.
std::vector<DataCenter> parse_dcs(const std::string& text);

// Ring all-reduce of `parameters` fp16 parameters over `gpus` GPUs at `bytes_per_s`:
// 4 P (N - 1) / (N BW); 0 for one GPU.
double ring_allreduce_s(double parameters, int gpus, double bytes_per_s);

}  // namespace perseus::geo
