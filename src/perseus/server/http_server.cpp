#include "perseus/server/http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <mutex>

#include <fmt/format.h>
#include <httplib.h>

#include "perseus/model/errors.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/service.hpp"

namespace perseus::server {
namespace {

// httplib's own pool has a fixed size, and every connection holds a thread for its
// keep-alive life; this one starts small and adds a thread whenever work waits and no
// thread is idle, up to `max_threads`. Threads stay once started.
class ElasticThreadPool final : public httplib::TaskQueue {
 public:
  explicit ElasticThreadPool(std::size_t max_threads) : max_threads_(std::max<std::size_t>(1, max_threads)) {}
  ~ElasticThreadPool() override = default;

  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) {
      try {
        threads_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        if (threads_.empty()) throw;  // no thread at all: nothing would ever run the job
      }
    }
    lock.unlock();
    cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, and nothing left to do
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const std::size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> threads_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

using Clock = std::chrono::steady_clock;

std::chrono::microseconds microseconds_of(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// Waits up to `timeout` (<= 0: not at all) for `events` on `fd`; true when they came.
bool wait_for(int fd, short events, std::chrono::microseconds timeout) {
  pollfd p{fd, events, 0};
  const auto until = Clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n == 0 || errno != EINTR) return false;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    port = ntohs(in.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    port = ntohs(in6.sin6_port);
  }
  ip = text;
}

// A connection's socket as httplib reads a request from it, with one deadline for the whole
// request: every read waits at most until then (httplib's own stream bounds each read only,
// so a byte every few seconds kept a request, and its worker thread, alive forever).
// Buffered like httplib's SocketStream: the request line is read a byte at a time.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, Clock::time_point deadline, std::chrono::microseconds read_timeout,
                 std::chrono::microseconds write_timeout)
      : fd_(fd), deadline_(deadline), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  bool is_readable() const override {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) {
      expired_ = true;
      return false;
    }
    if (wait_for(fd_, POLLIN, std::min(read_timeout_, left))) return true;
    expired_ = expired_ || Clock::now() >= deadline_;
    return false;
  }

  bool is_writable() const override {
    if (!wait_for(fd_, POLLOUT, write_timeout_)) return false;
    // As httplib does: a peer that has closed its end gets nothing written.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return true;
    char byte;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  ssize_t read(char* ptr, std::size_t size) override {
    if (offset_ < filled_) {
      const std::size_t n = std::min(size, filled_ - offset_);
      std::memcpy(ptr, buffer_ + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    const bool buffered = size < sizeof(buffer_);
    ssize_t n;
    do {
      n = ::recv(fd_, buffered ? buffer_ : ptr, buffered ? sizeof(buffer_) : size, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0 || !buffered) return n;
    const std::size_t given = std::min(size, static_cast<std::size_t>(n));
    std::memcpy(ptr, buffer_, given);
    offset_ = given;
    filled_ = static_cast<std::size_t>(n);
    return static_cast<ssize_t>(given);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) wrote_ = true;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  int socket() const override { return fd_; }

  bool expired() const { return expired_; }
  bool wrote() const { return wrote_; }

 private:
  const int fd_;
  const Clock::time_point deadline_;
  const std::chrono::microseconds read_timeout_;
  const std::chrono::microseconds write_timeout_;
  char buffer_[4096];
  std::size_t offset_ = 0, filled_ = 0;
  mutable bool expired_ = false;
  bool wrote_ = false;
};

// The stream of the request this thread is reading, for the error handler.
thread_local const DeadlineStream* current_stream = nullptr;

ApiRequest to_api_request(const httplib::Request& req) {
  ApiRequest request;
  request.method = req.method;
  request.path = req.path;
  for (const auto& [key, value] : req.params) request.query.emplace(key, value);  // first value wins
  request.body = req.body;
  request.authorization = req.get_header_value("Authorization");
  return request;
}

}  // namespace

// httplib's server with its connection loop replaced (the same loop, over DeadlineStream):
// process_request does the parsing and routing as before. Waiting for a keep-alive
// connection's next request blocks in poll(2), looking for a stop every 50 ms, instead of
// httplib's 10 ms polls and 1 ms sleeps.
class DeadlineServer final : public httplib::Server {
 public:
  DeadlineServer(std::chrono::microseconds request_timeout, std::function<void()> on_expired)
      : request_timeout_(request_timeout), on_expired_(std::move(on_expired)) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    const auto taken_up = Clock::now();  // time queued for a worker is not the client's doing
    const auto read_timeout = microseconds_of(read_timeout_sec_, read_timeout_usec_);
    const auto write_timeout = microseconds_of(write_timeout_sec_, write_timeout_usec_);
    bool ok = false;
    for (std::size_t served = 0; served < keep_alive_max_count_; ++served) {
      // The first request must arrive whole within the timeout; a later one may first idle for
      // the keep-alive timeout.
      const auto idle_until = served == 0 ? taken_up + request_timeout_
                                          : Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
      bool readable = false;
      while (svr_sock_ != INVALID_SOCKET && Clock::now() < idle_until) {
        const auto slice = std::min<Clock::duration>(idle_until - Clock::now(), std::chrono::milliseconds(50));
        if ((readable = wait_for(sock, POLLIN, std::chrono::duration_cast<std::chrono::microseconds>(slice)))) break;
      }
      if (!readable) break;
      DeadlineStream stream(sock, served == 0 ? taken_up + request_timeout_ : Clock::now() + request_timeout_,
                            read_timeout, write_timeout);
      current_stream = &stream;
      bool connection_closed = false;
      ok = process_request(stream, served + 1 == keep_alive_max_count_, connection_closed, nullptr);
      current_stream = nullptr;
      // Dropped before httplib could even answer (the request line never came whole).
      if (stream.expired() && !stream.wrote() && on_expired_) on_expired_();
      if (!ok || connection_closed) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  const std::chrono::microseconds request_timeout_;
  const std::function<void()> on_expired_;
};

HttpServer::HttpServer(Service& service, HttpOptions options)
    : service_(service), options_(std::move(options)) {
  const auto request_timeout = std::chrono::microseconds(
      static_cast<std::int64_t>(std::clamp(options_.request_timeout_s, 0.001, 1e6) * 1e6));
  server_ = std::make_unique<DeadlineServer>(request_timeout, [this] {
    service_.record_rejected(ApiRequest{}, 408);
  });
  httplib::Server& svr = *server_;
  const auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    const ApiResponse response = service_.handle(to_api_request(req));
    res.status = response.status;
    if (response.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(response.body, response.content_type.c_str());
  };
  svr.Get(".*", handler);
  svr.Post(".*", handler);
  svr.Put(".*", handler);
  svr.Delete(".*", handler);
  svr.Patch(".*", handler);
  svr.Options(".*", handler);
  // Requests httplib refuses itself (oversized body, malformed HTTP) still get a JSON detail.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string detail = fmt::format("HTTP {}", res.status);
    if (current_stream && current_stream->expired()) {
      res.status = 408;
      detail = fmt::format("the request did not arrive whole within the server's {} s (--request-timeout)",
                           options_.request_timeout_s);
    } else if (res.status == 413) {
      detail = fmt::format("request body larger than the server's limit of {} bytes", options_.payload_limit_bytes);
    } else if (res.status == 400) {
      detail = "malformed HTTP request";
    }
    service_.record_rejected(to_api_request(req), res.status);
    res.set_content(error_response(res.status, detail).body, "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    res.status = 500;
    res.set_content(error_response(500, "internal error").body, "application/json");
  });
  // Answers go out as headers then body: without TCP_NODELAY, Nagle's algorithm holds the
  // body until the client's delayed ACK (40 ms on Linux). Accepted sockets inherit it.
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(options_.payload_limit_bytes);
  if (options_.keep_alive_s > 0) {
    svr.set_keep_alive_max_count(1u << 20);  // clients keep one connection per rank for the whole job
    svr.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, std::ceil(options_.keep_alive_s))));
  } else {
    svr.set_keep_alive_max_count(1);
  }
  svr.set_read_timeout(static_cast<time_t>(options_.read_timeout_s));
  svr.set_socket_options([this](int fd) {
    // SO_REUSEADDR (not httplib's SO_REUSEPORT): a restarted server rebinds its port at
    // once, yet a second server on the same port fails instead of sharing it.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = fd;
  });
  const std::size_t max_threads = options_.max_threads;
  svr.new_task_queue = [max_threads] { return new ElasticThreadPool(max_threads); };
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
  const bool ok = options_.port == 0 ? (port_ = server_->bind_to_any_port(options_.host)) > 0
                                     : server_->bind_to_port(options_.host, options_.port);
  if (!ok) {
    throw InputError(fmt::format("cannot listen on {}:{} (address in use, or not an address of this host?)",
                                 options_.host, options_.port));
  }
  if (options_.port != 0) port_ = options_.port;
  // httplib listens with a backlog of 5; a thousand ranks connecting at once need more.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
}

void HttpServer::run() { server_->listen_after_bind(); }

void HttpServer::start() {
  bind();
  thread_ = std::thread([this] { run(); });
  for (int waited_ms = 0; !server_->is_running(); ++waited_ms) {
    if (waited_ms > 10000) throw InputError(fmt::format("the server on port {} did not start listening", port_));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void HttpServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace perseus::server
