#include "perseus/server/http_server.hpp"

#include <sys/socket.h>

#include <cmath>
#include <condition_variable>
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

HttpServer::HttpServer(Service& service, HttpOptions options)
    : service_(service), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
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
    if (res.status == 413) {
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
