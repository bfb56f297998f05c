// The server over loopback HTTP: the protocol end to end, the payload limit, malformed
// HTTP, and a bounded fuzz loop of malformed requests against every route.
#include "perseus/server/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "perseus/server/frontier_table.hpp"
#include "perseus/server/service.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::rank_of;

const std::vector<int> kFrequencies = {1410, 1350, 1290, 1230, 1170, 1110};

class HttpFixture : public ::testing::Test {
 protected:
  void start(ServiceOptions options, HttpOptions http = {}) {
    service_ = std::make_unique<Service>(std::move(options));
    http.port = 0;
    http.host = "127.0.0.1";
    server_ = std::make_unique<HttpServer>(*service_, http);
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (service_) service_->shutdown();
  }
  httplib::Client client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_keep_alive(true);
    c.set_read_timeout(30, 0);
    if (!token.empty()) c.set_bearer_token_auth(token);
    return c;
  }
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> server_;
};

// A loopback connection to `port`; -1 when refused.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

ServiceOptions options_with(double barrier_timeout_s, std::string token = "") {
  ServiceOptions options;
  options.scheduler = parse_scheduler_config("Frontier", json::object());
  options.barrier_timeout_s = barrier_timeout_s;
  options.token = std::move(token);
  return options;
}

TEST_F(HttpFixture, TheProtocolEndToEnd) {
  start(options_with(20.0, "tok"));
  httplib::Client c = client("tok");
  auto registered = c.Post("/register_job", testing::job_info(2, 2, 1).dump(), "application/json");
  ASSERT_TRUE(registered);
  ASSERT_EQ(registered->status, 200) << registered->body;
  EXPECT_EQ(registered->get_header_value("Content-Type"), "application/json");
  const std::string id = json::parse(registered->body).get<std::string>();
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      const json rank = {{"rank", rank_of(2, 1, d, p, 0)}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", 0},
                         {"available_frequencies", kFrequencies}};
      auto r = c.Post(("/register_rank/" + id).c_str(), rank.dump(), "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200);
      EXPECT_EQ(r->body, "null");
    }
  }
  const std::string csv = profile_to_csv(perseus::testing::synthetic_profile(2, 6, 3));
  auto uploaded = c.Post(("/profile/" + id + "?p_blocking=80&unit_time=0.001&microbatches=4&schedule=1f1b").c_str(),
                         csv, "text/csv");
  ASSERT_TRUE(uploaded);
  ASSERT_EQ(uploaded->status, 202) << uploaded->body;
  ASSERT_TRUE(service_->wait_until_idle(60s));
  // Unauthenticated writes are refused over HTTP too, with the standard challenge.
  auto refused = client().Post("/straggler", R"({"id": 0, "degree": 2})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(refused->get_header_value("WWW-Authenticate"), "Bearer");
  auto straggler = c.Post("/straggler", json({{"job_id", id}, {"id", 2}, {"degree", 1.5}}).dump(), "application/json");
  ASSERT_TRUE(straggler);
  ASSERT_EQ(straggler->status, 200) << straggler->body;

  // GET /schedule moves the barrier: it needs the token as well.
  auto anonymous = client().Get(("/schedule/" + id + "?rank=0").c_str());
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);

  // A round over four connections: '+' in the id survives the URL.
  std::vector<std::future<std::pair<int, std::string>>> answers;
  for (int r = 0; r < 4; ++r) {
    answers.push_back(std::async(std::launch::async, [&, r] {
      httplib::Client own = client("tok");
      auto res = own.Get(("/schedule/" + id + "?rank=" + std::to_string(r)).c_str());
      return res ? std::pair(res->status, res->body) : std::pair(-1, std::string());
    }));
  }
  for (int r = 0; r < 4; ++r) {
    const auto [status, body] = answers[r].get();
    ASSERT_EQ(status, 200) << body;
    const json schedule = json::parse(body);
    EXPECT_EQ(schedule.at("rank"), r);
    EXPECT_EQ(schedule.at("frequencies").size(), 8u);  // 4 forwards + 4 backwards
  }
  auto result = c.Post(("/result/" + id).c_str(), R"({"rank": 1, "iter_time": [2.0], "iter_energy": [100.0]})",
                       "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->body, "null");
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("perseus_http_requests_total{route=\"/schedule/{job_id}\",status=\"200\"} 4"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("perseus_http_requests_total{route=\"/straggler\",status=\"401\"} 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("perseus_straggler_replan_seconds_count 1"), std::string::npos);
}

TEST_F(HttpFixture, OversizedBodiesAndMalformedHttpAreRefusedWithJson) {
  HttpOptions http;
  http.payload_limit_bytes = 4096;
  start(options_with(1.0), http);
  httplib::Client c = client();
  auto big = c.Post("/register_job", std::string(10000, ' ') + testing::job_info(1, 1, 1).dump(), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(json::parse(big->body, nullptr, false).value("detail", "").find("4096 bytes"), std::string::npos)
      << big->body;
  EXPECT_EQ(service_->job_count(), 0u);

  // Raw garbage on a socket.
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  const std::string garbage = "\x16\x03\x01 NOT HTTP AT ALL\r\n\r\n";
  ASSERT_GT(::write(fd, garbage.data(), garbage.size()), 0);
  char buffer[512] = {};
  const ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buffer).rfind("HTTP/1.1 400", 0), 0u) << buffer;

  auto healthy = c.Get("/healthz");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  // HEAD: GET's status and headers, no body; the connection goes on.
  auto head = c.Head("/healthz");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_NE(head->get_header_value("Content-Length"), "0");
  EXPECT_EQ(c.Get("/healthz")->status, 200);
}

// Clients that send a request a byte at a time, each byte well within the per-read timeout:
// until each connection is closed by the server, what it sent and when it was closed.
class Dribblers {
 public:
  Dribblers(int port, int count, std::chrono::milliseconds every) {
    for (int i = 0; i < count; ++i) {
      const int fd = connect_to(port);
      EXPECT_GE(fd, 0);
      fds_.push_back(fd);
    }
    closed_after_.assign(fds_.size(), -1.0);
    thread_ = std::thread([this, every] {
      const std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(1000, 'a');
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t sent = 0; !stop_ && sent < request.size(); ++sent) {
        for (std::size_t i = 0; i < fds_.size(); ++i) {
          if (closed_after_[i] >= 0) continue;
          char byte;
          const ssize_t got = ::recv(fds_[i], &byte, 1, MSG_DONTWAIT);
          const bool gone = got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                            ::send(fds_[i], &request[sent], 1, MSG_NOSIGNAL) < 0;
          // An answer (a 408) also counts: the server is done with the request.
          if (gone || got > 0) {
            closed_after_[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          }
        }
        if (std::all_of(closed_after_.begin(), closed_after_.end(), [](double t) { return t >= 0; })) break;
        std::this_thread::sleep_for(every);
      }
    });
  }
  ~Dribblers() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  // Seconds from the start to each connection's close; -1 if still open.
  std::vector<double> wait() {
    if (thread_.joinable()) thread_.join();
    return closed_after_;
  }

 private:
  std::vector<int> fds_;
  std::vector<double> closed_after_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(HttpFixture, ClientsTricklingBytesAreDroppedAndHealthzStillAnswers) {
  HttpOptions http;
  http.request_timeout_s = 1.0;  // per read: 30 s, far more than the 100 ms between bytes
  start(options_with(1.0), http);
  {
    // The default thread count: twenty tricklers hold twenty threads, /healthz gets its own.
    Dribblers dribblers(server_->port(), 20, 100ms);
    std::this_thread::sleep_for(300ms);
    const auto start = std::chrono::steady_clock::now();
    auto healthy = client().Get("/healthz");
    ASSERT_TRUE(healthy);
    EXPECT_EQ(healthy->status, 200);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
    // Each is dropped about a second after it was taken up, while still sending.
    for (double closed : dribblers.wait()) {
      EXPECT_GT(closed, 0.8);
      EXPECT_LT(closed, 3.0);
    }
  }
  server_->stop();
  service_->shutdown();
  server_.reset();
  service_.reset();

  // Four threads, eight tricklers: without a whole-request deadline they would hold every
  // thread for as long as they trickle, and /healthz would wait forever.
  http.max_threads = 4;
  start(options_with(1.0), http);
  Dribblers dribblers(server_->port(), 8, 100ms);
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  auto healthy = client().Get("/healthz");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.5);
  for (double closed : dribblers.wait()) EXPECT_GE(closed, 0.0);
  // Those dropped mid-headers were told why.
  const std::string metrics = client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("status=\"408\""), std::string::npos) << metrics;
}

// Reads until the peer closes, `limit` bytes or `timeout`; what came.
std::string read_some(int fd, std::chrono::milliseconds timeout, std::size_t limit = 4096) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buffer[4096];
  while (out.size() < limit) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    if (out.find("\r\n\r\n") != std::string::npos && out.find('}') != std::string::npos) break;
  }
  return out;
}

TEST_F(HttpFixture, ThousandsOfIdleConnectionsAndASlowLorisDoNotHoldUpTheBarrier) {
  HttpOptions http;
  http.request_timeout_s = 30.0;  // the slow client is never cut off during the test
  http.keep_alive_s = 60.0;
  start(options_with(20.0), http);
  httplib::Client c = client();
  auto registered = c.Post("/register_job", testing::job_info(4, 1, 1, {{"microbatches", 2}}).dump(), "application/json");
  ASSERT_TRUE(registered);
  const std::string id = json::parse(registered->body).get<std::string>();
  for (int p = 0; p < 4; ++p) {
    const json rank = {{"rank", p}, {"dp_rank", 0}, {"pp_rank", p}, {"tp_rank", 0}, {"available_frequencies", kFrequencies}};
    ASSERT_EQ(c.Post(("/register_rank/" + id).c_str(), rank.dump(), "application/json")->status, 200);
  }
  // 4,096 connections that never send a byte, and twenty that send a header a byte at a time.
  std::vector<int> idle;
  for (int i = 0; i < 4096; ++i) {
    const int fd = connect_to(server_->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  Dribblers slow(server_->port(), 20, 50ms);
  std::this_thread::sleep_for(200ms);

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<int>> answers;
  for (int r = 0; r < 4; ++r) {
    answers.push_back(std::async(std::launch::async, [&, r] {
      auto res = client().Get(("/schedule/" + id + "?rank=" + std::to_string(r)).c_str());
      return res ? res->status : -1;
    }));
  }
  for (auto& answer : answers) EXPECT_EQ(answer.get(), 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  auto healthy = c.Get("/healthz");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  for (int fd : idle) ::close(fd);
}

// Deadlines are swept, not timed one by one: a connection idle past --keep-alive is still
// closed (within the sweep's 0.1 s), one that keeps asking is not, and the answer's head is
// the one HTTP/1.1 and 1.0 clients expect.
TEST_F(HttpFixture, IdleConnectionsCloseAfterTheKeepAliveAndAnswersKeepTheirHead) {
  HttpOptions http;
  http.keep_alive_s = 0.5;
  http.first_request_idle_s = 0.5;
  start(options_with(1.0), http);
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  // Three requests 0.3 s apart: each within the keep-alive of the one before.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(::send(fd, get.data(), get.size(), 0), static_cast<ssize_t>(get.size()));
    const std::string answer = read_some(fd, 2000ms);
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ", 0), 0u) << answer;
    EXPECT_EQ(answer.find("Connection:"), std::string::npos) << answer;
    std::this_thread::sleep_for(300ms);
  }
  // Then idle: closed about 0.5 s after the last answer.
  const auto idle_from = std::chrono::steady_clock::now();
  char byte = 0;
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);  // orderly close, not the 3 s receive timeout
  const double closed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_from).count();
  EXPECT_GT(closed_after, 0.05);
  EXPECT_LT(closed_after, 1.0);
  ::close(fd);

  // HTTP/1.0 asking for keep-alive is told so; a HEAD gets the GET's length and no body.
  const int old = connect_to(server_->port());
  ASSERT_GE(old, 0);
  const std::string head = "HEAD /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
  ASSERT_EQ(::send(old, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  std::string answer;
  char buffer[1024];
  for (ssize_t n; answer.find("\r\n\r\n") == std::string::npos && (n = ::recv(old, buffer, sizeof(buffer), 0)) > 0;) {
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  EXPECT_EQ(answer.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: keep-alive\r\n"), std::string::npos) << answer;
  const std::string body = client().Get("/healthz")->body;
  EXPECT_NE(answer.find("Content-Length: " + std::to_string(body.size()) + "\r\n\r\n"), std::string::npos) << answer;
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "");
  ::close(old);
}

// Several loops, each with its share of the connections: a round's ranks sit on every loop, the
// last rank's loop releases them all (their answers are posted to their own loops), idle
// connections on every loop are closed by the one sweep, and stopping ends every loop.
TEST_F(HttpFixture, SeveralLoopsShareTheConnectionsReleaseRoundsTogetherAndStop) {
  HttpOptions http;
  http.io_threads = 4;
  http.keep_alive_s = 5.0;
  start(options_with(20.0), http);
  constexpr int kPipelines = 8, kStages = 4, kRounds = 3;
  httplib::Client c = client();
  auto registered =
      c.Post("/register_job", testing::job_info(kStages, kPipelines, 1, {{"microbatches", 2}}).dump(), "application/json");
  ASSERT_TRUE(registered);
  const std::string id = json::parse(registered->body).get<std::string>();
  for (int d = 0; d < kPipelines; ++d) {
    for (int p = 0; p < kStages; ++p) {
      const json rank = {{"rank", rank_of(kStages, 1, d, p, 0)}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", 0},
                         {"available_frequencies", kFrequencies}};
      ASSERT_EQ(c.Post(("/register_rank/" + id).c_str(), rank.dump(), "application/json")->status, 200);
    }
  }
  // Each rank on its own keep-alive connection (32 connections, dealt over the 4 loops),
  // three rounds in a row.
  std::vector<std::future<std::vector<int>>> ranks;
  for (int r = 0; r < kStages * kPipelines; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      httplib::Client own = client();
      std::vector<int> statuses;
      for (int round = 0; round < kRounds; ++round) {
        auto res = own.Get(("/schedule/" + id + "?rank=" + std::to_string(r)).c_str());
        statuses.push_back(res ? res->status : -1);
        if (res && res->status == 200) {
          EXPECT_EQ(json::parse(res->body).at("rank"), r) << res->body;
        }
      }
      return statuses;
    }));
  }
  for (auto& rank : ranks) EXPECT_EQ(rank.get(), std::vector<int>(kRounds, 200));

  // Four idle connections, one on each loop, closed by the sweep after the keep-alive.
  server_->stop();
  server_.reset();
  http.keep_alive_s = 0.3;
  http.first_request_idle_s = 0.3;
  http.port = 0;
  server_ = std::make_unique<HttpServer>(*service_, http);
  server_->start();
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(connect_to(server_->port()));
  for (int fd : idle) {
    ASSERT_GE(fd, 0);
    timeval tv{3, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char byte = 0;
    EXPECT_EQ(::recv(fd, &byte, 1, 0), 0);  // an orderly close, not the 3 s receive timeout
    ::close(fd);
  }
  // Stopping with connections open on every loop returns at once.
  for (int i = 0; i < 4; ++i) idle[static_cast<std::size_t>(i)] = connect_to(server_->port());
  const auto stopping = std::chrono::steady_clock::now();
  server_->stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count(), 1.0);
  for (int fd : idle) ::close(fd);
}

TEST_F(HttpFixture, AChunkedBodyIsHeldToTheLimitAndAHugeLengthIsRefusedAtOnce) {
  HttpOptions http;
  http.payload_limit_bytes = 1 << 20;
  start(options_with(1.0), http);

  // 64 KiB chunks, up to 64 MiB, until the answer comes: refused once the body passes
  // 1 MiB, long before its end.
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /register_job HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  std::size_t sent = 0;
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  while (sent < (64u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;  // answered
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // the server stopped reading (or closed)
    sent += static_cast<std::size_t>(n);
  }
  const std::string answer = read_some(fd, 2000ms);
  ::close(fd);
  EXPECT_LT(sent, 16u << 20);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("1048576 bytes"), std::string::npos) << answer.substr(0, 400);

  // A length of a terabyte and no body: answered at once, not after a read timeout.
  const int other = connect_to(server_->port());
  ASSERT_GE(other, 0);
  const std::string huge = "POST /register_job HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n";
  ASSERT_GT(::send(other, huge.data(), huge.size(), MSG_NOSIGNAL), 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string refused = read_some(other, 5000ms);
  ::close(other);
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused.substr(0, 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(service_->job_count(), 0u);
}

// Bodies that are wrong in every way the routes can meet.
std::string malformed_body(std::mt19937& rng, const std::string& job_id) {
  const json valid_job = testing::job_info(1, 1, 1);
  const json valid_rank = {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", {1410}}};
  const json valid_result = {{"rank", 0}, {"iter_time", {1.0}}, {"time_breakdown", {{"forward", {{0.1}}}}}};
  const std::vector<json> templates = {valid_job, valid_rank, valid_result,
                                       json({{"job_id", job_id}, {"id", 0}, {"degree", 2.0}})};
  const std::vector<json> odd_values = {nullptr, true, -1, 0, 1e308, -1e308, "x", "", json::array(), json::object(),
                                        json(18446744073709551615ull), json::array({json::array({nullptr})}), 2147483648LL,
                                        "\u00e9\u4e2d"};
  std::uniform_int_distribution<int> pick(0, 9);
  switch (pick(rng)) {
    case 0: {  // random bytes
      std::string s(std::uniform_int_distribution<int>(0, 300)(rng), '\0');
      for (char& c : s) c = static_cast<char>(rng());
      return s;
    }
    case 1: {  // valid JSON cut short
      const std::string s = templates[rng() % templates.size()].dump();
      return s.substr(0, std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng));
    }
    case 2:
    case 3:
    case 4: {  // one field replaced by a value of another type or range
      json body = templates[rng() % templates.size()];
      auto it = body.begin();
      std::advance(it, static_cast<long>(rng() % body.size()));
      *it = odd_values[rng() % odd_values.size()];
      return body.dump();
    }
    case 5: {  // a field dropped
      json body = templates[rng() % templates.size()];
      auto it = body.begin();
      std::advance(it, static_cast<long>(rng() % body.size()));
      body.erase(it.key());
      return body.dump();
    }
    case 6:
      return std::string(20000, '[') + std::string(20000, ']');  // deep nesting
    case 7:
      return odd_values[rng() % odd_values.size()].dump();  // JSON, but not an object
    case 8:
      return "stage,instruction,frequency,time,energy\n0,forward,1410,0.1,nan\n0,backward,x,0.2,3\n";
    default:
      return "";
  }
}

TEST_F(HttpFixture, AFuzzLoopLeavesTheServerServingAndItsDatabaseConsistent) {
  start(options_with(0.3));
  httplib::Client c = client();
  auto registered = c.Post("/register_job", testing::job_info(1, 1, 1, {{"microbatches", 2}}).dump(), "application/json");
  ASSERT_TRUE(registered);
  const std::string id = json::parse(registered->body).get<std::string>();
  ASSERT_EQ(c.Post(("/register_rank/" + id).c_str(),
                   json({{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", kFrequencies}})
                       .dump(),
                   "application/json")
                ->status,
            200);

  std::mt19937 rng(20240917);
  const std::vector<std::string> paths = {"/register_job",         "/register_rank/" + id, "/register_rank/nope",
                                          "/schedule/" + id,       "/schedule/nope",       "/result/" + id,
                                          "/profile/" + id,        "/straggler",           "/api/jobs",
                                          "/info",                 "/metrics",             "/",
                                          "/healthz",              "/register_rank/",      "/schedule/" + id + "/x",
                                          "/%00%ff",               "/result/" + id + "%2F..%2F"};
  const std::vector<std::string> queries = {"", "?rank=0", "?rank=-1", "?rank=99999999999999999999", "?rank=abc",
                                            "?p_blocking=80&microbatches=2", "?p_blocking=-3&microbatches=x",
                                            "?rank=0&rank=1", "?microbatches=1e9"};
  std::map<int, int> statuses;
  for (int i = 0; i < 400; ++i) {
    const std::string path = paths[rng() % paths.size()] + queries[rng() % queries.size()];
    const std::string body = malformed_body(rng, id);
    const unsigned method = rng() % 4;
    httplib::Result res = method == 0   ? c.Get(path.c_str())
                          : method == 1 ? c.Put(path.c_str(), body, "application/json")
                                        : c.Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(res) << "no answer to " << path;
    ++statuses[res->status];
    EXPECT_LT(res->status, 500) << path << " " << body.substr(0, 200) << " -> " << res->body;
    if (res->status >= 400) {
      const json detail = json::parse(res->body, nullptr, false);
      EXPECT_TRUE(detail.is_object() && detail.contains("detail")) << path << " -> " << res->body;
    }
  }
  EXPECT_GT(statuses[422] + statuses[400] + statuses[404] + statuses[405] + statuses[409], 300);

  // Still serving, and memory and database agree.
  auto healthy = c.Get("/healthz");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  EXPECT_EQ(service_->store().check_consistency(), "ok");
  EXPECT_EQ(service_->store().count_jobs(), service_->job_count());
  const auto stored = service_->store().load_all();
  const auto jobs = json::parse(c.Get("/api/jobs")->body).at("jobs");
  EXPECT_EQ(stored.size(), jobs.size());
  for (const json& job : jobs) {
    const auto it = std::find_if(stored.begin(), stored.end(), [&](const StoredJob& s) { return s.job_id == job.at("job_id"); });
    ASSERT_NE(it, stored.end());
    EXPECT_EQ(it->ranks.size(), job.at("ranks_registered").get<std::size_t>());
  }
  auto schedule = c.Get(("/schedule/" + id + "?rank=0").c_str());
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule->status, 200) << schedule->body;
}

}  // namespace
}  // namespace perseus::server
