#include <gtest/gtest.h>

#include "perseus/geo/wan.hpp"
#include "perseus/geo/workload.hpp"

namespace perseus::geo {
namespace {

TEST(Wan, TcpFitReproducesTable1) {
  const TcpModel& fit = tcp_fit();
  EXPECT_NEAR(fit.exponent, 1.028, 0.001);  // about 1 / RTT
  for (const TcpSample& s : tcp_table()) EXPECT_NEAR(fit.mbps(s.latency_ms) / s.mbps, 1.0, 0.005) << s.latency_ms;
}

TEST(Wan, FitIsExactOnAPowerLaw) {
  const TcpModel m = fit_tcp_model({{5, 1000.0 / 25}, {10, 1000.0 / 100}, {20, 1000.0 / 400}});
  EXPECT_NEAR(m.exponent, 2.0, 1e-12);
  EXPECT_NEAR(m.coefficient_mbps, 1000.0, 1e-9);
  EXPECT_THROW(fit_tcp_model({{10, 100}}), InputError);
  EXPECT_THROW(fit_tcp_model({{10, 100}, {10, 50}}), InputError);
  EXPECT_THROW(fit_tcp_model({{10, 100}, {-1, 50}}), InputError);
}

TEST(Wan, ConnectionsAddUpToThePairCap) {
  NetworkSpec net;
  net.dcs = parse_dcs("2,2");
  net.wan_latency_ms = 40.0;
  net.connections = 1;
  const double one = tcp_fit().mbps(40.0) * 1e6 / 8.0;
  EXPECT_DOUBLE_EQ(net.wan_pair_bandwidth(), one);
  net.connections = 4;
  EXPECT_DOUBLE_EQ(net.wan_pair_bandwidth(), 4 * one);
  net.connections = 1000;
  EXPECT_DOUBLE_EQ(net.wan_pair_bandwidth(), 5e9 / 8.0);  // the 5 Gbps cap
  EXPECT_DOUBLE_EQ(net.pair_bandwidth(0, 0), 100e9 / 8.0);
  EXPECT_DOUBLE_EQ(net.latency_s(0, 1), 0.04);
  EXPECT_DOUBLE_EQ(net.latency_s(1, 1), 0.0);
}

TEST(Wan, RingAllReduceIsTheClosedForm) {
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1e9, 4, 1e10), 4.0 * 1e9 * 3 / (4 * 1e10));
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1e9, 1, 1e10), 0.0);
}

TEST(Wan, BadNetworksNameTheProblem) {
  EXPECT_THROW(parse_dcs("4,0,4"), InputError);
  EXPECT_THROW(parse_dcs("4,x"), InputError);
  EXPECT_THROW(parse_dcs(""), InputError);
  EXPECT_EQ(parse_dcs("600,500").size(), 2u);
  NetworkSpec net;
  net.dcs = parse_dcs("4,4");
  net.wan_latency_ms = -1.0;
  try {
    validate(net);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("latency"), std::string::npos);
  }
  net.wan_latency_ms = 10.0;
  net.connections = 0;
  EXPECT_THROW(validate(net), InputError);
}

TEST(Workload, SizesComeFromTheModel) {
  NetworkSpec net;
  net.dcs = parse_dcs("4,4,4");
  WorkloadSpec spec;  // GPT-A: L = H = 4096
  const Workload w = make_workload(spec, net);
  EXPECT_DOUBLE_EQ(w.activation_bytes, 2.0 * 4096 * 4096);
  ASSERT_EQ(w.num_stages(), 4);
  for (const StageWork& s : w.stages) {
    EXPECT_GT(s.forward_s, 0.0);
    EXPECT_NEAR(s.backward_s / s.forward_s, 2.0, 0.1);  // backward does twice the FLOPs
    EXPECT_EQ(s.recompute_s, s.forward_s);
    EXPECT_GE(s.max_in_flight, 1);
  }
  // Two of the eight layers per stage; the embedding on the first, the head on the last.
  EXPECT_EQ(w.stages[0].first_layer, 0);
  EXPECT_EQ(w.stages[1].end_layer - w.stages[1].first_layer, 2);
  spec.forward_ms = 10.0, spec.comm_ratio = 3.0;
  const Workload r = make_workload(spec, net);
  for (const StageWork& s : r.stages) EXPECT_NEAR(s.forward_s, 0.01, 1e-12);
  EXPECT_NEAR(r.activation_bytes / net.wan_pair_bandwidth(), 0.03, 1e-12);
}

TEST(Workload, BadWorkloadsAreRefused) {
  NetworkSpec net;
  net.dcs = parse_dcs("4,4,4");
  WorkloadSpec spec;
  spec.stages = 9;  // GPT-A has 8 layers
  EXPECT_THROW(make_workload(spec, net), InputError);
  spec.stages = 1;
  spec.model = "gpt-b";
  spec.memory_gb = 20.0;  // four 805M-parameter layers: 52 GB of weights and Adam state
  try {
    make_workload(spec, net);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
  spec.model = "no-such-model";
  EXPECT_THROW(make_workload(spec, net), InputError);
}

}  // namespace
}  // namespace perseus::geo
