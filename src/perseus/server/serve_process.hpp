// What a server process needs besides its routes: logfmt lines on stderr, and SIGINT or SIGTERM
// that stop it cleanly. Shared by `perseus serve` and `perseus cluster serve`.
#pragma once

#include <signal.h>

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "perseus/server/http_server.hpp"

namespace perseus::server {

// Python's logging names (INFO; NOTSET, its lowest, logs everything) and spdlog's, any case.
// InputError naming `option` for another.
spdlog::level::level_enum parse_log_level(const std::string& name, std::string_view option);

// A logger writing "ts=... level=... <message>" lines to stderr, flushed at info and above.
std::shared_ptr<spdlog::logger> make_stderr_logger(const std::string& name, spdlog::level::level_enum level);

class StopSignals {
 public:
  // Blocks SIGINT and SIGTERM in this thread. Construct it before any other thread starts: they
  // inherit the mask, so only serve() receives the signals.
  StopSignals();
  // Runs `http` until SIGINT or SIGTERM (logged as event=stopping) stops it.
  void serve(HttpServer& http, spdlog::logger& log);

 private:
  sigset_t signals_;
};

}  // namespace perseus::server
