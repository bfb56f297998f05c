#include "perseus/server/server_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "perseus/model/errors.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/serve_process.hpp"
#include "perseus/server/service.hpp"

namespace perseus::server {
namespace {

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 7787;
  std::string db = "perseus-server.db";
  std::string token;
  std::string token_scope = "all";
  std::size_t threads = 4;
  std::size_t io_threads = HttpOptions{}.io_threads;
  std::string log_level = "info";
  std::string scheduler = "Frontier";
  std::string scheduler_args = "{}";
  double max_job_idle_time = 7 * 24 * 3600.0;
  double barrier_timeout = 0.0;
  std::size_t max_body_mib = 16;
  double keep_alive = HttpOptions{}.keep_alive_s;
  double request_timeout = 10.0;
  bool dump_data = true;  // zeus's default
  std::string dump_dir = "dump";
};

// The settings zeus's server reads from the environment (pydantic's BaseSettings, prefix
// ZEUS_PFO_); the flag of each, when given, overrides it.
constexpr const char* kSchedulerEnv = "ZEUS_PFO_SCHEDULER";
constexpr const char* kSchedulerArgsEnv = "ZEUS_PFO_SCHEDULER_ARGS";
constexpr const char* kLogLevelEnv = "ZEUS_PFO_LOG_LEVEL";
constexpr const char* kDumpDataEnv = "ZEUS_PFO_DUMP_DATA";
constexpr const char* kDumpDirEnv = "ZEUS_PFO_DUMP_DIR";
constexpr const char* kMaxJobIdleTimeEnv = "ZEUS_PFO_MAX_JOB_IDLE_TIME";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A setting from the environment, its name in any case (ZEUS_PFO_SCHEDULER, zeus_pfo_scheduler),
// as pydantic's settings read it. Two spellings with different values are refused: which one
// pydantic takes depends on the environment's order.
std::optional<std::string> environment_setting(std::string_view name) {
  std::optional<std::pair<std::string, std::string>> found;
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view text(*entry);
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos || !same_ignoring_case(text.substr(0, equals), name)) continue;
    std::pair<std::string, std::string> setting{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
    if (found && found->second != setting.second) {
      throw InputError(fmt::format("{} and {} are both set, to different values; settings ignore case, so set one",
                                   found->first, setting.first));
    }
    found = std::move(setting);
  }
  if (!found) return std::nullopt;
  return found->second;
}

// Pydantic's reading of a boolean setting, any case.
bool parse_bool_setting(const char* name, const std::string& value) {
  const std::string v = lower(value);
  for (const char* yes : {"1", "true", "t", "yes", "y", "on"}) {
    if (v == yes) return true;
  }
  for (const char* no : {"0", "false", "f", "no", "n", "off"}) {
    if (v == no) return false;
  }
  throw InputError(fmt::format("{}: expected a boolean (true/false, t/f, yes/no, y/n, on/off, 1/0), got '{}'", name,
                               value));
}

double parse_positive_seconds(const char* name, const std::string& value) {
  double seconds = 0;
  const char* end = value.data() + value.size();
  const auto [stop, ec] = std::from_chars(value.data(), end, seconds);
  if (ec != std::errc() || stop != end || value.empty() || !std::isfinite(seconds) || seconds <= 0) {
    throw InputError(fmt::format("{}: expected a positive number of seconds, got '{}'", name, value));
  }
  return seconds;
}

// The options that zeus's environment settings give, where the command line does not.
struct ZeusOptions {
  CLI::Option* scheduler = nullptr;
  CLI::Option* scheduler_args = nullptr;
  CLI::Option* log_level = nullptr;
  CLI::Option* dump_data = nullptr;
  CLI::Option* dump_dir = nullptr;
  CLI::Option* max_job_idle_time = nullptr;
};

ServeArgs with_environment(ServeArgs args, const ZeusOptions& given) {
  const auto from_env = [](CLI::Option* flag, const char* name) {
    return flag->count() == 0 ? environment_setting(name) : std::nullopt;
  };
  if (auto v = from_env(given.scheduler, kSchedulerEnv)) args.scheduler = *v;
  if (auto v = from_env(given.scheduler_args, kSchedulerArgsEnv)) args.scheduler_args = *v;
  if (auto v = from_env(given.log_level, kLogLevelEnv)) args.log_level = *v;
  if (auto v = from_env(given.dump_data, kDumpDataEnv)) args.dump_data = parse_bool_setting(kDumpDataEnv, *v);
  if (auto v = from_env(given.dump_dir, kDumpDirEnv)) args.dump_dir = *v;
  if (auto v = from_env(given.max_job_idle_time, kMaxJobIdleTimeEnv)) {
    args.max_job_idle_time = parse_positive_seconds(kMaxJobIdleTimeEnv, *v);
  }
  return args;
}

void run_serve(const ServeArgs& args) {
  StopSignals stop_signals;  // before any thread starts
  const auto logger = make_stderr_logger("perseus-server", parse_log_level(args.log_level, "--log-level / ZEUS_PFO_LOG_LEVEL"));

  const auto scheduler_args = nlohmann::json::parse(args.scheduler_args, nullptr, false);
  if (scheduler_args.is_discarded()) {
    throw InputError("--scheduler-args / ZEUS_PFO_SCHEDULER_ARGS: not valid JSON: " + args.scheduler_args);
  }
  if (args.token_scope != "all" && args.token_scope != "straggler") {
    throw InputError("--token-scope: expected 'all' or 'straggler', got '" + args.token_scope + "'");
  }
  ServiceOptions options;
  options.scheduler = parse_scheduler_config(args.scheduler, scheduler_args);
  options.db_path = args.db;
  options.token = args.token;
  options.token_scope = args.token_scope == "all" ? TokenScope::kAllChanges : TokenScope::kStragglerOnly;
  options.max_job_idle_s = args.max_job_idle_time;
  options.barrier_timeout_s = args.barrier_timeout;
  options.housekeeping_interval_s = std::clamp(args.max_job_idle_time / 4.0, 0.05, 30.0);
  options.dump_data = args.dump_data;
  options.dump_dir = args.dump_dir;
  options.logger = logger;
  Service service(std::move(options));

  HttpOptions http_options;
  http_options.host = args.host;
  http_options.port = args.port;
  http_options.max_threads = args.threads;
  http_options.io_threads = args.io_threads;
  http_options.payload_limit_bytes = args.max_body_mib << 20;
  http_options.keep_alive_s = args.keep_alive;
  http_options.request_timeout_s = args.request_timeout;
  HttpServer http(service, http_options);
  http.bind();
  logger->info("event=listening host={} port={} db={} scheduler={} jobs={} auth={} event_loops={}",
               logfmt_value(args.host), http.port(), logfmt_value(args.db), logfmt_value(args.scheduler),
               service.job_count(), logfmt_value(args.token.empty() ? "none" : "bearer (" + args.token_scope + ")"),
               event_loops(args.io_threads));

  stop_signals.serve(http, *logger);
  service.shutdown();
  logger->info("event=stopped");
}

}  // namespace

void add_server_command(CLI::App& app) {
  static ServeArgs args;
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the server training jobs talk to (HTTP/JSON, the zeus/Perseus protocol plus profiles, frontiers, "
               "stragglers)");
  cmd->add_option("--host", args.host, "Address to listen on (0.0.0.0 to listen beyond this host)")
      ->capture_default_str();
  cmd->add_option("--port", args.port, "TCP port")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--db", args.db, "SQLite database of jobs, profiles and frontiers (':memory:' keeps nothing)")
      ->capture_default_str();
  cmd->add_option("--token", args.token, "Bearer token that state-changing routes require")->envname("PERSEUS_TOKEN");
  cmd->add_option("--token-scope", args.token_scope,
                  "all: every state-changing route needs the token; straggler: only /straggler (for clients that "
                  "cannot send one)")
      ->capture_default_str();
  cmd->add_option("--threads", args.threads,
                  "Threads that run the routes which may block (uploads, registrations, pages); GET /schedule "
                  "runs on the event loop, and a rank waiting at a barrier holds no thread")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{65536}));  // as before; more than 256 run as 256
  cmd->add_option("--io-threads", args.io_threads,
                  "Event loops (a thread each, with its share of the connections) that read requests and write "
                  "answers; a released round's answers are written by all of them at once. 0: half the host's "
                  "cores, 1 to 8")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{64}));
  // The ZEUS_PFO_* settings are read by with_environment, names in any case as zeus reads them.
  static ZeusOptions zeus;
  zeus.log_level = cmd->add_option("--log-level", args.log_level,
                                   "notset (everything), debug, info, warning, error, critical or off "
                                   "[env ZEUS_PFO_LOG_LEVEL]")
                       ->capture_default_str();
  zeus.scheduler = cmd->add_option("--scheduler", args.scheduler,
                                   "PointSolution, PointSolution3D, InVivoProfiling or Frontier [env ZEUS_PFO_SCHEDULER]")
                       ->capture_default_str();
  zeus.scheduler_args =
      cmd->add_option("--scheduler-args", args.scheduler_args,
                      "JSON arguments of the scheduler, e.g. '{\"solution_path\": \"freqs_pipeline_00042.py\"}' "
                      "[env ZEUS_PFO_SCHEDULER_ARGS]")
          ->capture_default_str();
  zeus.max_job_idle_time = cmd->add_option("--max-job-idle-time", args.max_job_idle_time,
                                           "Seconds after which an idle job is forgotten [env ZEUS_PFO_MAX_JOB_IDLE_TIME]")
                               ->capture_default_str()
                               ->check(CLI::PositiveNumber);
  cmd->add_option("--barrier-timeout", args.barrier_timeout,
                  "Seconds a schedule request waits for the other ranks of its round, then gets 408 and is no "
                  "longer counted in it (0: as long as it takes, as zeus's server waits)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--max-body-mib", args.max_body_mib, "Largest request body accepted, MiB")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  cmd->add_option("--keep-alive", args.keep_alive,
                  "Seconds an idle client connection is kept open between requests (0: one request per "
                  "connection); an idle connection costs the event loop nothing")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--request-timeout", args.request_timeout,
                  "Seconds within which a request (line, headers and body) must arrive whole from its first byte; "
                  "slower ones get 408 and their connection is closed")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  zeus.dump_data = cmd->add_flag("--dump-data,!--no-dump-data", args.dump_data,
                                 "Write zeus's dump files (ranks.json, N.sched.json, N.prof.json) and the deployed "
                                 "plans under --dump-dir/<job id>; on by default, as in zeus [env ZEUS_PFO_DUMP_DATA]");
  zeus.dump_dir = cmd->add_option("--dump-dir", args.dump_dir, "Where --dump-data writes [env ZEUS_PFO_DUMP_DIR]")
                      ->capture_default_str();
  cmd->callback([] { run_serve(with_environment(args, zeus)); });
}

}  // namespace perseus::server
