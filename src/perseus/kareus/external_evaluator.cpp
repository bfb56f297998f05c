#include "perseus/kareus/external_evaluator.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perseus::kareus {

ExternalEvaluator::ExternalEvaluator(std::string command, double timeout_s)
    : command_(std::move(command)), timeout_s_(timeout_s) {
  if (command_.empty()) throw InputError("kareus: the evaluator command is empty");
  if (!(timeout_s_ > 0.0)) throw InputError("kareus: the evaluator's timeout must be positive");
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0) throw EvaluatorError(fmt::format("kareus: cannot create pipes: {}", std::strerror(errno)));
  pid_ = ::fork();
  if (pid_ < 0) throw EvaluatorError(fmt::format("kareus: cannot start '{}': {}", command_, std::strerror(errno)));
  if (pid_ == 0) {
    // A process group of its own: stopping the command stops whatever it started too.
    ::setpgid(0, 0);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    ::execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here, so that it holds before stop() can run
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  ::fcntl(to_child_, F_SETFD, FD_CLOEXEC);
  ::fcntl(from_child_, F_SETFD, FD_CLOEXEC);
  ::signal(SIGPIPE, SIG_IGN);  // a command that died is reported, not a signal
}

ExternalEvaluator::~ExternalEvaluator() { stop(); }

void ExternalEvaluator::stop() {
  if (to_child_ >= 0) ::close(to_child_), to_child_ = -1;
  if (from_child_ >= 0) ::close(from_child_), from_child_ = -1;
  if (pid_ > 0) {
    // Closing stdin asks it to finish; a command that does not within a moment is killed.
    for (int i = 0; i < 20; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        ::kill(-pid_, SIGKILL);  // anything it left behind
        pid_ = -1;
        return;
      }
      ::usleep(10000);
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::string ExternalEvaluator::read_line(const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (true) {
    const std::size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0.0) {
      stop();
      throw EvaluatorError(fmt::format("kareus: evaluator '{}' gave no answer within {:g} s for {}", command_, timeout_s_, what));
    }
    pollfd fd{from_child_, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // the deadline check above ends it
    char chunk[4096];
    const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    stop();
    throw EvaluatorError(fmt::format("kareus: evaluator '{}' ended without answering {}", command_, what));
  }
}

Measurement ExternalEvaluator::evaluate(const Partition& partition, const Config& config) {
  const std::string what = fmt::format("{} ({})", partition.name, describe(config, partition));
  if (pid_ < 0) throw EvaluatorError(fmt::format("kareus: evaluator '{}' is not running (it failed before)", command_));
  nlohmann::json kernels = nlohmann::json::array();
  for (const Kernel& k : partition.compute) kernels.push_back(k.name);
  const std::string request = nlohmann::json{{"partition", partition.name},
                                             {"forward", partition.forward},
                                             {"kernels", kernels},
                                             {"collective", partition.comm.name},
                                             {"collective_bus_bytes", partition.comm.bus_bytes},
                                             {"clock_mhz", config.clock_mhz},
                                             {"comm_sms", config.comm_sms},
                                             {"first", config.first},
                                             {"last", config.last}}
                                  .dump() +
                              "\n";
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::write(to_child_, request.data() + sent, request.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stop();
      throw EvaluatorError(fmt::format("kareus: evaluator '{}' stopped reading before {}", command_, what));
    }
    sent += static_cast<std::size_t>(n);
  }
  const std::string line = read_line(what);
  nlohmann::json answer;
  try {
    answer = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    stop();
    throw EvaluatorError(fmt::format("kareus: evaluator '{}' answered {} with a line that is not JSON: '{}'", command_,
                                     what, line.substr(0, 200)));
  }
  if (answer.is_object() && answer.contains("error")) {
    stop();
    throw EvaluatorError(fmt::format("kareus: evaluator '{}' failed on {}: {}", command_, what, answer["error"].dump()));
  }
  Measurement m;
  try {
    m.time_s = answer.at("time_s").get<double>();
    m.dynamic_j = answer.at("dynamic_j").get<double>();
    m.static_j = answer.at("static_j").get<double>();
    m.effective_mhz = answer.contains("effective_mhz") ? answer["effective_mhz"].get<double>() : config.clock_mhz;
  } catch (const nlohmann::json::exception&) {
    stop();
    throw EvaluatorError(fmt::format("kareus: evaluator '{}' answered {} without numbers time_s, dynamic_j, static_j: '{}'",
                                     command_, what, line.substr(0, 200)));
  }
  if (!(std::isfinite(m.time_s) && m.time_s > 0.0 && std::isfinite(m.dynamic_j) && m.dynamic_j >= 0.0 &&
        std::isfinite(m.static_j) && m.static_j >= 0.0)) {
    stop();
    throw EvaluatorError(fmt::format("kareus: evaluator '{}' answered {} with a time of {} s and energies {} J, {} J",
                                     command_, what, m.time_s, m.dynamic_j, m.static_j));
  }
  return m;
}

}  // namespace perseus::kareus
