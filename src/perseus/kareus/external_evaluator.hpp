// An evaluator that is a command: how a user with GPUs plugs real profiling into Kareus's
// search (docs/kareus.md, "Real GPUs"). perseus starts the command once and speaks JSON lines
// on its stdin and stdout, one request and one answer per configuration:
//
//   -> {"partition":"attention-allreduce","forward":true,"kernels":["add+norm",...],
//       "collective":"allreduce","collective_bus_bytes":176160768,
//       "clock_mhz":1290,"comm_sms":10,"first":0,"last":4}          (first = last = -1: sequential)
//   <- {"time_s":0.00107,"dynamic_j":0.36,"static_j":0.08}            or {"error":"why"}
//
// Anything else (a crash, silence beyond the timeout, a line that is not such an answer) is an
// EvaluatorError naming the command, the configuration and what went wrong; the command is then
// stopped, and what was evaluated before stays with the caller.
#pragma once

#include <stdexcept>
#include <string>

#include "perseus/kareus/evaluator.hpp"

namespace perseus::kareus {

class EvaluatorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ExternalEvaluator : public Evaluator {
 public:
  // Starts `command` under /bin/sh. `timeout_s`: the longest one answer may take.
  explicit ExternalEvaluator(std::string command, double timeout_s = 600.0);
  ~ExternalEvaluator() override;
  ExternalEvaluator(const ExternalEvaluator&) = delete;
  ExternalEvaluator& operator=(const ExternalEvaluator&) = delete;

  Measurement evaluate(const Partition& partition, const Config& config) override;
  std::string name() const override { return "external: " + command_; }

 private:
  void stop();
  std::string read_line(const std::string& what);

  std::string command_;
  double timeout_s_;
  int pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;
};

}  // namespace perseus::kareus
