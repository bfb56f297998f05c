// server_load_bench: N concurrent ranks on loopback, each with its own keep-alive
// connection, fetching its schedule (GET /schedule, the barrier) and posting a result
// (POST /result) every iteration, against a server serving a frontier's T_min plan; then
// straggler notices. Prints p50/p99 latencies and throughput per run and the median over runs.
// The ranks are one asynchronous load generator on one thread (not a thread per rank, which
// on two cores starved the server it measured), or on --generator-threads where the host has
// cores to spare.
//
//   server_load_bench [--ranks 1024] [--jobs 1] [--stages 8] [--microbatches 12]
//                     [--rounds 40] [--warmup 5] [--runs 3] [--stragglers 200] [--profile CSV]
//
// GET /schedule answers only when every rank of the job has asked, so its raw latency is
// mostly waiting for the last rank. The figure that says how fast the server answers is
// the latency after release: for each request, from the moment the job's last rank had
// sent its request (or from its own send, if later) to its answer.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/client/server_connection.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/protocol/protocol.hpp"
#include "perseus/server/frontier_table.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/service.hpp"

namespace {

using namespace perseus;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Args {
  int ranks = 1024;
  int jobs = 1;
  int stages = 8;
  int microbatches = 12;
  int rounds = 40;
  int warmup = 5;
  int runs = 3;
  int stragglers = 200;
  std::string profile = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/bloom-176b+a100-sxm.csv";
  double p_blocking = 83.64;
  double unit_time = 0.001;
  std::string serve_binary;  // empty: the server runs in this process
  double keep_alive = 600.0;
  std::size_t server_threads = 0;  // 0: the server's default
  std::size_t io_threads = 0;      // 0: the server's default
  std::size_t generator_threads = 1;
};

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
  return values[std::min(index, values.size() - 1)];
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

// The server under test: in this process, or `perseus serve` as a child process (then its
// CPU time is measured apart from the ranks').
class BenchServer {
 public:
  BenchServer(const Args& args, const std::filesystem::path& db) {
    const std::size_t threads = args.server_threads ? args.server_threads : server::HttpOptions{}.max_threads;
    if (args.serve_binary.empty()) {
      server::ServiceOptions options;
      options.scheduler = server::parse_scheduler_config("Frontier", json::object());
      options.db_path = db.string();
      options.barrier_timeout_s = 120.0;
      service_ = std::make_unique<server::Service>(options);
      server::HttpOptions http;
      http.port = 0;
      http.max_threads = threads;
      http.keep_alive_s = args.keep_alive;
      if (args.io_threads) http.io_threads = args.io_threads;
      http_ = std::make_unique<server::HttpServer>(*service_, http);
      http_->start();
      port_ = http_->port();
      return;
    }
    log_ = db.string() + ".log";
    std::vector<std::string> argv_strings = {args.serve_binary, "serve",     "--port",  "0", "--db", db.string(),
                                             "--threads",       std::to_string(threads), "--barrier-timeout", "120",
                                             "--keep-alive",    fmt::format("{}", args.keep_alive)};
    if (args.io_threads) argv_strings.insert(argv_strings.end(), {"--io-threads", std::to_string(args.io_threads)});
    std::vector<char*> argv;
    for (std::string& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int err = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(err, STDERR_FILENO);
      // No dump files (on by default, as in zeus): the bench measures serving, not writing.
      ::setenv("ZEUS_PFO_DUMP_DATA", "false", 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(err);
    for (int i = 0; i < 2000 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const std::string text = read_text_file(log_);
      const auto at = text.find("event=listening");
      if (at != std::string::npos) {
        const auto p = text.find("port=", at);
        port_ = std::atoi(text.c_str() + p + 5);
      }
    }
    if (port_ == 0) throw std::runtime_error("the server did not start: " + read_text_file(log_));
  }
  ~BenchServer() {
    if (http_) http_->stop();
    if (service_) service_->shutdown();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      std::filesystem::remove(log_);
    }
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int port() const { return port_; }
  bool separate() const { return pid_ > 0; }
  // CPU seconds the server process has used (child only).
  double cpu_seconds() const {
    if (pid_ <= 0) return 0.0;
    const std::string stat = read_text_file(fmt::format("/proc/{}/stat", pid_));
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    double ticks = 0.0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i >= 14) ticks += std::stod(field);  // utime, stime
    }
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  // Peak resident memory of the server process, MiB (child only).
  double peak_rss_mib() const {
    if (pid_ <= 0) return 0.0;
    const std::string status = read_text_file(fmt::format("/proc/{}/status", pid_));
    const auto at = status.find("VmHWM:");
    return at == std::string::npos ? 0.0 : std::atof(status.c_str() + at + 6) / 1024.0;
  }
  void wait_for_frontiers(client::ServerConnection& connection, std::size_t jobs) {
    if (service_) {
      if (!service_->wait_until_idle(std::chrono::minutes(30))) throw std::runtime_error("frontier computation timed out");
      return;
    }
    for (int i = 0; i < 36000; ++i) {
      const json list = connection.get_json("/api/jobs").at("jobs");
      std::size_t ready = 0;
      for (const json& job : list) ready += job.at("phase") == "frontier";
      if (ready == jobs) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("frontier computation timed out");
  }

 private:
  std::unique_ptr<server::Service> service_;
  std::unique_ptr<server::HttpServer> http_;
  pid_t pid_ = -1;
  std::string log_;
  int port_ = 0;
};

struct RunFigures {
  double frontier_s = 0.0;
  double get_raw_p50 = 0, get_raw_p99 = 0;      // GET /schedule, send to answer (includes the barrier)
  double get_after_p50 = 0, get_after_p99 = 0;  // GET /schedule after the job's last rank asked
  double post_p50 = 0, post_p99 = 0;            // POST /result
  double round_p50 = 0;                         // first send to last answer of a round, per job
  double requests_per_s = 0;
  double replan_p50 = 0, replan_p99 = 0, replan_max = 0;  // server time from notice to plan ready
  double notice_rtt_p50 = 0;                              // POST /straggler round trip
  double switch_after_p99 = 0;  // latency after release in the round that deployed a straggler plan
  bool plan_switched = false;
  double server_cpu_us_per_request = 0;  // with --serve-binary: server CPU time per request
  double server_peak_rss_mib = 0;        // with --serve-binary
};

std::string bench_result(int rank, int microbatches) {
  client::ProfilingResult r;
  r.rank = rank;
  r.iter_time = {2.83};
  r.iter_energy = {6012.5};
  r.time_breakdown = {{"forward", {std::vector<double>(static_cast<std::size_t>(microbatches), 0.0512)}},
                      {"backward", {std::vector<double>(static_cast<std::size_t>(microbatches), 0.0991)}}};
  r.energy_breakdown = {{"forward", {std::vector<double>(static_cast<std::size_t>(microbatches), 24.15)}},
                        {"backward", {std::vector<double>(static_cast<std::size_t>(microbatches), 45.97)}}};
  return protocol::to_json(r).dump();
}

// The ranks as event loops (Boost.Asio): every rank a keep-alive connection and a state
// machine, so that 4,096 ranks cost the benchmark one thread (or --generator-threads), not
// 4,096 that would starve the server of the machine's cores. A round is two phases, as in
// training: every rank asks for its schedule (all GETs written at once, as after the
// all-reduce that ends an iteration); once all have their answers (the iteration runs), every
// rank posts its result. Answers are timed as a loop reads them, so a time includes that
// loop's work on the answers read before it in the same wake-up (a few microseconds each):
// on a host with cores to spare, more loops (each with its share of the ranks) keep the
// generator's own work out of the server's figures.
class AsyncRanks {
 public:
  struct RankPlan {
    std::string job_id;
    int rank = 0;
    std::string result_body;
    bool keep_bodies = false;  // keep the schedule bodies (to check which plan was deployed)
  };
  struct Plan {
    int port = 0;
    int rounds = 0;
    std::size_t threads = 1;
    std::vector<RankPlan> ranks;
  };
  struct Times {
    double sent = 0, got = 0, posted = 0;
    std::string schedule_body;
  };

  AsyncRanks(Plan plan, std::function<double()> clock, std::function<void(int)> between_rounds)
      : plan_(std::move(plan)), clock_(std::move(clock)), between_rounds_(std::move(between_rounds)) {
    times_.assign(plan_.ranks.size() * static_cast<std::size_t>(plan_.rounds), Times{});
    server_ = tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(plan_.port));
    const std::size_t loops = std::max<std::size_t>(1, plan_.threads);
    for (std::size_t t = 0; t < loops; ++t) loops_.push_back(std::make_unique<Loop>());
    for (std::size_t g = 0; g < plan_.ranks.size(); ++g) {
      Loop& loop = *loops_[g % loops];
      auto rank = std::make_unique<Rank>(loop.io);
      rank->index = g;
      rank->socket.connect(server_);
      rank->socket.set_option(tcp::no_delay(true));
      const RankPlan& p = plan_.ranks[g];
      const std::string path = encode_id(p.job_id);
      rank->get_prefix = fmt::format("GET /schedule/{}?rank={}&round=", path, p.rank);
      rank->post = fmt::format(
          "POST /result/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
          path, p.result_body.size(), p.result_body);
      loop.ranks.push_back(rank.get());
      ranks_.push_back(std::move(rank));
    }
  }

  // Runs every round; throws on the first failed request.
  void run() {
    start_round(0);
    std::vector<std::thread> helpers;
    for (std::size_t t = 1; t < loops_.size(); ++t) helpers.emplace_back([this, t] { loops_[t]->io.run(); });
    loops_[0]->io.run();
    for (std::thread& helper : helpers) helper.join();
    if (!failure_.empty()) throw std::runtime_error(failure_);
  }

  const Times& times(int rank, int round) const {
    return times_[static_cast<std::size_t>(rank) * static_cast<std::size_t>(plan_.rounds) + static_cast<std::size_t>(round)];
  }

 private:
  struct Rank {
    explicit Rank(asio::io_context& io) : socket(io) {}
    tcp::socket socket;
    beast::flat_buffer buffer;
    std::optional<http::response_parser<http::string_body>> parser;
    std::string get_prefix, get, post;
    std::size_t index = 0;
  };
  // One event loop, its thread's ranks, and the guard that keeps it running between the
  // phases other loops finish.
  struct Loop {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
    std::vector<Rank*> ranks;
  };

  static std::string encode_id(const std::string& id) {
    std::string out;
    for (char c : id) out += c == '+' ? std::string("%2B") : std::string(1, c);
    return out;
  }
  Times& slot(const Rank& rank) {
    return times_[rank.index * static_cast<std::size_t>(plan_.rounds) + static_cast<std::size_t>(round_)];
  }

  // Every loop runs `f` on each of its ranks (posted: the phase that starts it ended on
  // whichever loop read the last answer).
  template <typename F>
  void on_every_rank(F f) {
    for (auto& loop : loops_) {
      asio::post(loop->io, [loop = loop.get(), f] {
        for (Rank* rank : loop->ranks) f(*rank);
      });
    }
  }

  void start_round(int k) {
    round_ = k;  // every rank is idle: no loop reads it until the posts below
    outstanding_.store(ranks_.size());
    on_every_rank([this](Rank& rank) { send_get(rank); });
  }

  void send_get(Rank& rank) {
    rank.get = rank.get_prefix + std::to_string(round_) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    slot(rank).sent = clock_();
    asio::async_write(rank.socket, asio::buffer(rank.get), [this, &rank](boost::system::error_code ec, std::size_t) {
      if (ec) return fail(rank, "GET /schedule", ec.message());
      read_answer(rank, [this, &rank](std::string body) {
        Times& t = slot(rank);
        t.got = clock_();
        if (plan_.ranks[rank.index].keep_bodies) t.schedule_body = std::move(body);
        if (outstanding_.fetch_sub(1) > 1) return;
        outstanding_.store(ranks_.size());
        on_every_rank([this](Rank& r) { send_post(r); });
      });
    });
  }

  void send_post(Rank& rank) {
    asio::async_write(rank.socket, asio::buffer(rank.post), [this, &rank](boost::system::error_code ec, std::size_t) {
      if (ec) return fail(rank, "POST /result", ec.message());
      read_answer(rank, [this, &rank](std::string) {
        slot(rank).posted = clock_();
        if (outstanding_.fetch_sub(1) > 1) return;
        if (round_ + 1 == plan_.rounds) return finish();  // done: every loop's run() returns
        try {
          between_rounds_(round_ + 1);
        } catch (const std::exception& e) {
          return fail(rank, "between rounds", e.what());
        }
        start_round(round_ + 1);
      });
    });
  }

  template <typename Then>
  void read_answer(Rank& rank, Then then) {
    rank.parser.emplace();
    rank.parser->body_limit(64 << 20);
    http::async_read(rank.socket, rank.buffer, *rank.parser,
                     [this, &rank, then = std::move(then)](boost::system::error_code ec, std::size_t) mutable {
                       if (ec) return fail(rank, "reading an answer", ec.message());
                       auto& response = rank.parser->get();
                       if (response.result_int() != 200) {
                         return fail(rank, "answer", fmt::format("HTTP {}: {}", response.result_int(), response.body()));
                       }
                       if (!response.keep_alive()) reconnect(rank);  // a server without keep-alive
                       then(std::move(response.body()));
                     });
  }

  void reconnect(Rank& rank) {
    boost::system::error_code ignored;
    rank.socket.close(ignored);
    rank.buffer.clear();
    rank.socket.connect(server_, ignored);
    rank.socket.set_option(tcp::no_delay(true), ignored);
  }

  void finish() {
    for (auto& loop : loops_) loop->guard.reset();
  }

  void fail(const Rank& rank, const char* what, const std::string& detail) {
    {
      const std::lock_guard lock(failure_mutex_);
      if (failure_.empty()) {
        failure_ = fmt::format("rank {} of job {}, round {}: {}: {}", plan_.ranks[rank.index].rank,
                               plan_.ranks[rank.index].job_id, round_, what, detail);
      }
    }
    for (auto& loop : loops_) loop->io.stop();
  }

  Plan plan_;
  std::function<double()> clock_;
  std::function<void(int)> between_rounds_;
  std::vector<std::unique_ptr<Loop>> loops_;
  tcp::endpoint server_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<Times> times_;
  int round_ = 0;
  std::atomic<std::size_t> outstanding_{0};
  std::mutex failure_mutex_;
  std::string failure_;
};

RunFigures run_once(const Args& args, const std::string& profile_csv, int run_index) {
  RunFigures figures;
  const std::filesystem::path db =
      std::filesystem::temp_directory_path() / fmt::format("perseus-load-bench-{}-{}.db", ::getpid(), run_index);
  std::filesystem::remove(db);
  BenchServer server(args, db);
  const std::string url = server.url();

  // Jobs of `stages` x dp ranks; every job uploads the profile and gets its frontier.
  const int per_job = args.ranks / args.jobs;
  const int dp = per_job / args.stages;
  std::vector<std::string> job_ids;
  client::ServerConnection setup(client::ConnectionOptions::to(url));
  std::vector<int> clocks;
  {
    const Profile profile = Profile::parse_csv(profile_csv, "profile");
    for (const OperationProfile& op : profile.operations()) {
      for (const Measurement& m : op.measurements) clocks.push_back(m.frequency_mhz);
    }
    std::sort(clocks.rbegin(), clocks.rend());
    clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  }
  const auto frontier_start = Clock::now();
  for (int j = 0; j < args.jobs; ++j) {
    client::JobInfo info;
    info.pp_degree = args.stages;
    info.dp_degree = dp;
    info.world_size = args.stages * dp;
    info.job_metadata = fmt::format("bench{}", j);
    info.layout = client::PipelineLayout{ScheduleKind::k1F1B, args.microbatches, 1};
    job_ids.push_back(setup.register_job(info));
    setup.upload_profile(job_ids.back(), profile_csv, args.p_blocking, args.unit_time);
  }
  server.wait_for_frontiers(setup, job_ids.size());
  figures.frontier_s = std::chrono::duration<double>(Clock::now() - frontier_start).count() / args.jobs;

  // The ranks: one keep-alive connection each, driven from --generator-threads event loops.
  const int total = args.jobs * args.stages * dp;
  const int rounds = args.warmup + args.rounds;
  std::vector<std::vector<double>> sent(static_cast<std::size_t>(total), std::vector<double>(rounds)),
      got(static_cast<std::size_t>(total), std::vector<double>(rounds)),
      posted(static_cast<std::size_t>(total), std::vector<double>(rounds));
  std::vector<std::vector<std::string>> plan_seen(static_cast<std::size_t>(total), std::vector<std::string>(rounds));
  const auto t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  // Every rank starts a round together (as after the all-reduce that ends an iteration). Between
  // rounds, before `notice_round`, a straggler is announced in pipeline 1 of job 0.
  const int notice_round = args.warmup + args.rounds / 2;
  double loop_start = 0.0;
  double cpu_start = 0.0;
  const auto between_rounds = [&](int next_round) {
    if (next_round == args.warmup) {
      loop_start = seconds();
      cpu_start = server.cpu_seconds();
    }
    if (next_round == notice_round && dp > 1) {
      client::ServerConnection admin(client::ConnectionOptions::to(url));
      admin.announce_straggler(client::StragglerNotice{job_ids[0], args.stages, 0.0, 1.5});  // rank S: pipeline 1
    }
  };
  {
    client::ServerConnection registrar(client::ConnectionOptions{url, "", 30.0, 300.0, 10.0});
    for (int g = 0; g < total; ++g) {
      const int job = g / (args.stages * dp), rank = g % (args.stages * dp);
      registrar.register_rank(job_ids[static_cast<std::size_t>(job)],
                              client::RankInfo{rank, rank / args.stages, rank % args.stages, 0, clocks});
    }
  }
  AsyncRanks::Plan plan;
  plan.port = server.port();
  plan.rounds = rounds;
  plan.threads = args.generator_threads;
  for (int g = 0; g < total; ++g) {
    const int job = g / (args.stages * dp), rank = g % (args.stages * dp);
    plan.ranks.push_back({job_ids[static_cast<std::size_t>(job)], rank, bench_result(rank, args.microbatches),
                          /*keep_bodies=*/g == 0 || g == args.stages});
  }
  AsyncRanks ranks(std::move(plan), seconds, between_rounds);
  ranks.run();
  for (int g = 0; g < total; ++g) {
    for (int k = 0; k < rounds; ++k) {
      const AsyncRanks::Times& t = ranks.times(g, k);
      sent[g][k] = t.sent;
      got[g][k] = t.got;
      posted[g][k] = t.posted;
      if (!t.schedule_body.empty()) {
        const json schedule = json::parse(t.schedule_body);  // named: a range-for over a temporary's member dangles
        for (const json& entry : schedule.at("frequencies")) {
          plan_seen[g][k] += fmt::format("{},", entry.at(1).get<int>());
        }
      }
    }
  }
  const double loop_end = seconds();
  if (server.separate()) {
    figures.server_cpu_us_per_request = (server.cpu_seconds() - cpu_start) / (2.0 * total * args.rounds) * 1e6;
    figures.server_peak_rss_mib = server.peak_rss_mib();
  }

  std::vector<double> raw, after, post, round_times;
  for (int k = args.warmup; k < rounds; ++k) {
    for (int j = 0; j < args.jobs; ++j) {
      const int begin = j * args.stages * dp, end = begin + args.stages * dp;
      double last_sent = 0.0, first_sent = 1e300, last_done = 0.0;
      for (int g = begin; g < end; ++g) {
        last_sent = std::max(last_sent, sent[g][k]);
        first_sent = std::min(first_sent, sent[g][k]);
        last_done = std::max(last_done, got[g][k]);
      }
      round_times.push_back(last_done - first_sent);
      for (int g = begin; g < end; ++g) {
        raw.push_back(got[g][k] - sent[g][k]);
        after.push_back(got[g][k] - std::max(sent[g][k], last_sent));
        post.push_back(posted[g][k] - got[g][k]);
      }
    }
  }
  figures.get_raw_p50 = percentile(raw, 0.5);
  figures.get_raw_p99 = percentile(raw, 0.99);
  figures.get_after_p50 = percentile(after, 0.5);
  figures.get_after_p99 = percentile(after, 0.99);
  figures.post_p50 = percentile(post, 0.5);
  figures.post_p99 = percentile(post, 0.99);
  figures.round_p50 = median(round_times);
  figures.requests_per_s = 2.0 * total * args.rounds / (loop_end - loop_start);
  if (dp > 1) {
    // The round after the notice: pipeline 0 of job 0 runs the T_opt plan, pipeline 1 keeps T_min.
    const int k = notice_round;
    figures.plan_switched = plan_seen[0][k] != plan_seen[0][k - 1] && plan_seen[args.stages][k] == plan_seen[args.stages][k - 1];
    double last_sent = 0.0;
    for (int g = 0; g < args.stages * dp; ++g) last_sent = std::max(last_sent, sent[g][k]);
    std::vector<double> switch_after;
    for (int g = 0; g < args.stages * dp; ++g) switch_after.push_back(got[g][k] - std::max(sent[g][k], last_sent));
    figures.switch_after_p99 = percentile(switch_after, 0.99);
  }

  // Straggler notices on an idle server: the server's own time from notice to plan ready.
  std::vector<double> replan, rtt;
  client::ServerConnection admin(client::ConnectionOptions::to(url));
  for (int i = 0; i < args.stragglers; ++i) {
    const double degree = 1.0 + 0.05 * (i % 20);  // T' sweeps the frontier: many distinct plans
    const auto start = Clock::now();
    const json answer = admin.announce_straggler(client::StragglerNotice{job_ids[0], (i * 7) % (args.stages * dp), 0.0, degree});
    rtt.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    replan.push_back(answer.at("replan_seconds").get<double>());
  }
  figures.replan_p50 = percentile(replan, 0.5);
  figures.replan_p99 = percentile(replan, 0.99);
  figures.replan_max = percentile(replan, 1.0);
  figures.notice_rtt_p50 = percentile(rtt, 0.5);
  std::filesystem::remove(db);
  std::filesystem::remove(db.string() + "-wal");
  std::filesystem::remove(db.string() + "-shm");
  return figures;
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1000.0); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load benchmark of the perseus server: concurrent ranks on loopback"};
  Args args;
  app.add_option("--ranks", args.ranks, "Concurrent ranks (one connection each)")->capture_default_str();
  app.add_option("--jobs", args.jobs, "Jobs the ranks are split into")->capture_default_str();
  app.add_option("--stages", args.stages, "Pipeline stages per job")->capture_default_str();
  app.add_option("--microbatches", args.microbatches)->capture_default_str();
  app.add_option("--rounds", args.rounds, "Measured iterations")->capture_default_str();
  app.add_option("--warmup", args.warmup, "Iterations before measuring")->capture_default_str();
  app.add_option("--runs", args.runs, "Repetitions (fresh server each); medians are reported")->capture_default_str();
  app.add_option("--stragglers", args.stragglers, "Straggler notices timed per run")->capture_default_str();
  app.add_option("--profile", args.profile, "Profile CSV the jobs upload")->capture_default_str();
  app.add_option("--p-blocking", args.p_blocking)->capture_default_str();
  app.add_option("--unit-time", args.unit_time)->capture_default_str();
  app.add_option("--keep-alive", args.keep_alive, "The server's keep-alive timeout, s (0: none)")->capture_default_str();
  app.add_option("--serve-binary", args.serve_binary,
                 "Run `<binary> serve` as a child process (its CPU time is then reported apart)");
  app.add_option("--server-threads", args.server_threads,
                 "The server's --threads (0: its default; a server with a thread per waiting rank needs ranks + 64)")
      ->capture_default_str();
  app.add_option("--io-threads", args.io_threads, "The server's --io-threads (0: its default)")->capture_default_str();
  app.add_option("--generator-threads", args.generator_threads,
                 "Event loops driving the ranks (each its share of them): 1 on a small host, more where the server "
                 "has cores of its own, so that the generator's work stays out of the server's latencies")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  rlimit limit{};  // a descriptor per rank
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (args.jobs < 1 || args.ranks % (args.jobs * args.stages) != 0) {
    fmt::print(stderr, "server_load_bench: --ranks must be a multiple of --jobs x --stages\n");
    return 2;
  }
  try {
    const std::string csv = read_text_file(args.profile);
    fmt::print("server_load_bench: {} ranks in {} job(s) of {} stages x {} pipelines, M = {}, {} rounds (+{} warm-up), "
               "{} run(s), {} generator thread(s); profile {}\n",
               args.ranks, args.jobs, args.stages, args.ranks / args.jobs / args.stages, args.microbatches, args.rounds,
               args.warmup, args.runs, args.generator_threads, args.profile);
    fmt::print("{:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7}\n", "run",
               "req/s", "get_p50", "get_p99", "after_p50", "after_p99", "post_p50", "post_p99", "round", "replan50",
               "replan99", "replanmx", "switch99", "switched");
    std::vector<RunFigures> all;
    for (int r = 0; r < args.runs; ++r) {
      const RunFigures f = run_once(args, csv, r);
      all.push_back(f);
      fmt::print("{:>4} {:>10.0f} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7}\n", r,
                 f.requests_per_s, ms(f.get_raw_p50), ms(f.get_raw_p99), ms(f.get_after_p50), ms(f.get_after_p99),
                 ms(f.post_p50), ms(f.post_p99), ms(f.round_p50), ms(f.replan_p50), ms(f.replan_p99), ms(f.replan_max),
                 ms(f.switch_after_p99), f.plan_switched ? "yes" : "no");
      std::fflush(stdout);
    }
    const auto med = [&](double RunFigures::*field) {
      std::vector<double> v;
      for (const RunFigures& f : all) v.push_back(f.*field);
      return median(v);
    };
    fmt::print("median over {} run(s) (ms unless noted):\n", args.runs);
    fmt::print("  throughput                        {:.0f} requests/s (GET /schedule + POST /result)\n",
               med(&RunFigures::requests_per_s));
    fmt::print("  GET /schedule, send to answer     p50 {}  p99 {}  (includes waiting at the barrier)\n",
               ms(med(&RunFigures::get_raw_p50)), ms(med(&RunFigures::get_raw_p99)));
    fmt::print("  GET /schedule, after release      p50 {}  p99 {}  (target p99 < 5 ms)\n",
               ms(med(&RunFigures::get_after_p50)), ms(med(&RunFigures::get_after_p99)));
    fmt::print("  POST /result                      p50 {}  p99 {}\n", ms(med(&RunFigures::post_p50)),
               ms(med(&RunFigures::post_p99)));
    fmt::print("  round (first send to last answer) p50 {}\n", ms(med(&RunFigures::round_p50)));
    fmt::print("  straggler notice to plan ready    p50 {}  p99 {}  max {}  (server time; target < 10 ms)\n",
               ms(med(&RunFigures::replan_p50)), ms(med(&RunFigures::replan_p99)), ms(med(&RunFigures::replan_max)));
    fmt::print("  POST /straggler round trip        p50 {}\n", ms(med(&RunFigures::notice_rtt_p50)));
    fmt::print("  round deploying the straggler plan: after-release p99 {}\n", ms(med(&RunFigures::switch_after_p99)));
    fmt::print("  frontier computation per job      {:.3f} s\n", med(&RunFigures::frontier_s));
    if (!args.serve_binary.empty()) {
      fmt::print("  server CPU per request            {:.1f} us (server process, measured iterations)\n",
                 med(&RunFigures::server_cpu_us_per_request));
      fmt::print("  server peak RSS                   {:.1f} MiB\n", med(&RunFigures::server_peak_rss_mib));
    }
    bool switched = true;
    for (const RunFigures& f : all) switched &= f.plan_switched || args.ranks / args.jobs / args.stages < 2;
    if (!switched) {
      fmt::print(stderr, "server_load_bench: the straggler plan was not deployed at the next round\n");
      return 1;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "server_load_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
