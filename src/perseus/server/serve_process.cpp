#include "perseus/server/serve_process.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "perseus/model/errors.hpp"

namespace perseus::server {

spdlog::level::level_enum parse_log_level(const std::string& name, std::string_view option) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "trace" || n == "notset") return spdlog::level::trace;
  if (n == "debug") return spdlog::level::debug;
  if (n == "info") return spdlog::level::info;
  if (n == "warning" || n == "warn") return spdlog::level::warn;
  if (n == "error") return spdlog::level::err;
  if (n == "critical" || n == "fatal") return spdlog::level::critical;
  if (n == "off") return spdlog::level::off;
  throw InputError(fmt::format("{}: unknown level '{}' (notset, debug, info, warning, error, critical, off)", option, name));
}

std::shared_ptr<spdlog::logger> make_stderr_logger(const std::string& name, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  return logger;
}

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGUSR1);  // internal: wakes the signal thread when serving ends otherwise
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
}

void StopSignals::serve(HttpServer& http, spdlog::logger& log) {
  std::atomic<bool> serving{true};
  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&signals_, &signal);
    if (serving) {
      log.info("event=stopping signal={}", signal);
      http.stop();
    }
  });
  http.run();
  serving = false;
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
}

}  // namespace perseus::server
