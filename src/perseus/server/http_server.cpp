#include "perseus/server/http_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <array>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/server/api.hpp"
#include "perseus/server/service.hpp"

namespace perseus::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderLimitBytes = 16 << 10;
// After the last answer on a connection the server closes, it reads (and drops) what the
// client still sends, for at most this long and this much: closing with unread bytes makes
// the kernel send a reset, which can destroy the answer before the client reads it (a
// refused body). A client that goes on sending beyond that is cut off.
constexpr std::chrono::milliseconds kDrainTime{1000};
constexpr std::size_t kDrainBytes = 1 << 20;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(s, 0.0, 1e7)));
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded; in query strings '+' is a space, as cpp-httplib and every form encoder have it.
std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = hex_digit(text[i + 1]), lo = hex_digit(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_is_space && c == '+' ? ' ' : c;
  }
  return out;
}

// The first value of a repeated parameter wins.
void parse_query(std::string_view query, std::map<std::string, std::string>& out) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::string key = percent_decode(pair.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
    out.emplace(std::move(key), std::move(value));
  }
}

// A thousand ranks each hold a connection, and clients may keep more: use every descriptor
// the hard limit allows.
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

class Session;

// The event loop: `io_threads` threads run every socket, timer and parked request (each
// connection on a strand of its own, so its handlers never run at once); a small pool runs
// the routes that may block. Shared with the sessions, so that an answer the Service gives
// after the server stopped finds the loop still there (and is dropped).
class HttpServer::Loop : public std::enable_shared_from_this<HttpServer::Loop> {
 public:
  Loop(Service& service, HttpOptions options)
      : service(service),
        options(std::move(options)),
        io(static_cast<int>(std::max<std::size_t>(1, this->options.io_threads))),
        acceptor(io),
        // Settings written for the thread-per-connection front end asked for thousands.
        workers(std::clamp<std::size_t>(this->options.max_threads, 1, 256)),
        accept_pause(io) {}

  int bind();
  void run();
  void stop();
  void join_workers() { std::call_once(workers_joined, [this] { workers.join(); }); }
  bool stopping() const { return stopped; }

  Service& service;
  const HttpOptions options;  // before io: its thread count sizes the context
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::thread_pool workers;

 private:
  void accept();
  void forget_closed_sessions();

  asio::steady_timer accept_pause;
  std::mutex sessions_mutex;
  std::vector<std::weak_ptr<Session>> sessions;  // for stop()
  std::size_t sweep_at = 1024;
  std::atomic<bool> stopped{false};
  std::once_flag workers_joined;
};

namespace {

// The routes every rank calls every iteration run on the loop: a hop to a worker thread and
// back costs more than they do. None blocks: the barrier parks instead of waiting, health is
// a counter, and a result is parsed and counted (written to the database only when it
// changes a profiling job's state, a few times per job).
bool runs_on_loop(const ApiRequest& request) {
  if (request.method == "GET") return request.path == "/healthz" || request.path.rfind("/schedule/", 0) == 0;
  return request.method == "POST" && request.path.rfind("/result/", 0) == 0;
}

}  // namespace

// One connection: waits for a request, reads it, hands it to the Service, writes the answer,
// and either waits for the next (keep-alive) or closes. Everything runs on the loop thread;
// the Service's answer is posted back to it from whichever thread gave it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `socket` runs on a strand of the loop: every handler below runs on it.
  Session(std::shared_ptr<HttpServer::Loop> loop, tcp::socket socket)
      : loop_(std::move(loop)), socket_(std::move(socket)), timer_(socket_.get_executor()) {}

  // From any thread.
  void close_soon() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

  tcp::socket::executor_type executor() { return socket_.get_executor(); }

  void start() {
    const HttpOptions& o = loop_->options;
    wait_for_request(std::max(o.keep_alive_s, o.first_request_idle_s));
  }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  enum class State { kIdle, kReading, kParked, kWriting, kDraining, kClosed };

  // One timer per connection: what its expiry means depends on the state it was armed in.
  void arm_timer(Clock::duration after) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), armed = ++timer_generation_](boost::system::error_code ec) {
      if (ec || armed != self->timer_generation_) return;
      self->on_timeout();
    });
  }
  void disarm_timer() {
    ++timer_generation_;
    timer_.cancel();
  }

  void on_timeout() {
    switch (state_) {
      case State::kReading: {
        // Cancelling the read makes it complete with an error; on_read_error answers 408.
        timed_out_ = true;
        boost::system::error_code ignored;
        socket_.cancel(ignored);
        break;
      }
      case State::kIdle:
      case State::kWriting:  // a client that does not read its answer
      case State::kDraining:
        close();
        break;
      case State::kParked:
      case State::kClosed:
        break;
    }
  }

  void wait_for_request(double idle_s) {
    state_ = State::kIdle;
    if (buffer_.size() > 0) return read_request();  // pipelined: the next request is here
    arm_timer(seconds(idle_s));
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->state_ != State::kIdle) return;
      self->read_request();
    });
  }

  void read_request() {
    state_ = State::kReading;
    timed_out_ = false;
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(loop_->options.payload_limit_bytes);  // chunked bodies too
    arm_timer(seconds(loop_->options.request_timeout_s));
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                              if (ec) return self->on_read_error(ec);
                              self->on_header();
                            });
  }

  void on_header() {
    const auto& header = parser_->get();
    if (beast::iequals(header[http::field::expect], "100-continue") && !parser_->is_done()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                          if (ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_request();
    // A client that writes its headers and body apart, without TCP_NODELAY, holds the body
    // back until the headers are acknowledged, and Linux delays that acknowledgement by
    // 40 ms: acknowledge now (measured: every such request took 44 ms, now under 1).
    boost::system::error_code ignored;
    socket_.set_option(asio::detail::socket_option::boolean<IPPROTO_TCP, TCP_QUICKACK>(true), ignored);
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      if (ec) return self->on_read_error(ec);
      self->on_request();
    });
  }

  void on_read_error(boost::system::error_code ec) {
    if (state_ == State::kClosed) return;
    disarm_timer();
    const std::size_t limit = loop_->options.payload_limit_bytes;
    if (timed_out_) {
      // Counted and answered only when part of a request came; a connection that said
      // nothing is simply closed.
      if (!parser_->got_some()) return close();
      return refuse(408, fmt::format("the request did not arrive whole within the server's {} s (--request-timeout)",
                                     loop_->options.request_timeout_s));
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == http::error::partial_message) {
      return close();
    }
    if (ec == http::error::body_limit) {
      return refuse(413, fmt::format("request body larger than the server's limit of {} bytes", limit));
    }
    if (ec == http::error::header_limit) {
      return refuse(431, fmt::format("request headers larger than the server's limit of {} bytes", kHeaderLimitBytes));
    }
    refuse(400, "malformed HTTP request");
  }

  // Answers a request the HTTP layer refuses itself (never routed), then closes.
  void refuse(int status, std::string_view detail) {
    ApiRequest request;
    if (parser_ && parser_->is_header_done()) request = to_api_request(/*with_body=*/false);
    loop_->service.record_rejected(request, status);
    keep_alive_ = false;
    version_ = 11;
    write(error_response(status, detail));
  }

  ApiRequest to_api_request(bool with_body) {
    auto& message = parser_->get();
    ApiRequest request;
    const beast::string_view method = message.method_string();
    request.method.assign(method.data(), method.size());
    const beast::string_view raw_target = message.target();
    const std::string_view target(raw_target.data(), raw_target.size());
    const std::size_t question = target.find('?');
    request.path = percent_decode(target.substr(0, question), false);
    if (question != std::string_view::npos) parse_query(target.substr(question + 1), request.query);
    const beast::string_view authorization = message[http::field::authorization];
    request.authorization.assign(authorization.data(), authorization.size());
    if (with_body) request.body = std::move(message.body());
    return request;
  }

  void on_request() {
    disarm_timer();
    state_ = State::kParked;
    const auto& message = parser_->get();
    keep_alive_ = loop_->options.keep_alive_s > 0 && message.keep_alive();
    version_ = message.version();
    ApiRequest request = to_api_request(/*with_body=*/true);
    // HEAD is GET without the body, as HTTP has it (probes send it).
    head_only_ = request.method == "HEAD";
    if (head_only_) request.method = "GET";
    // The answer comes on whichever thread the Service gives it (a worker, or the loop when
    // another rank's request released the round); it is written on this connection's strand,
    // at once when already there. A round's answers are thus spread over the loop's threads.
    Service::Responder respond = [self = shared_from_this()](ApiResponse response) {
      // Answers that come after the server stopped (its Service answering parked requests
      // as it shuts down) have no connection left to go to.
      if (self->loop_->stopping()) return;
      asio::dispatch(self->socket_.get_executor(),
                     [self, response = std::move(response)]() mutable { self->write(std::move(response)); });
    };
    if (runs_on_loop(request)) {
      loop_->service.handle_async(request, std::move(respond));
    } else {
      asio::post(loop_->workers, [loop = loop_, request = std::move(request), respond = std::move(respond)]() mutable {
        loop->service.handle_async(request, std::move(respond));
      });
    }
  }

  void write(ApiResponse answer) {
    if (state_ == State::kClosed) return;
    state_ = State::kWriting;
    response_.emplace();
    auto& response = *response_;
    response.version(version_ == 10 ? 10 : 11);
    response.result(static_cast<unsigned>(answer.status));
    response.set(http::field::content_type, beast::string_view(answer.content_type.data(), answer.content_type.size()));
    if (answer.status == 401) response.set(http::field::www_authenticate, "Bearer");
    response.keep_alive(keep_alive_);
    response.body() = std::move(answer.body);
    response.prepare_payload();
    arm_timer(seconds(loop_->options.request_timeout_s));
    auto written = [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      self->disarm_timer();
      self->serializer_.reset();
      self->response_.reset();
      if (ec) return self->close();
      if (!self->keep_alive_) return self->drain_and_close();
      self->wait_for_request(self->loop_->options.keep_alive_s);
    };
    if (head_only_) {
      head_only_ = false;
      serializer_.emplace(response);
      return http::async_write_header(socket_, *serializer_, std::move(written));
    }
    http::async_write(socket_, response, std::move(written));
  }

  // Half-closes, then reads what the client still sends until it closes too (or kDrainTime).
  void drain_and_close() {
    state_ = State::kDraining;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    drained_ = 0;
    arm_timer(kDrainTime);
    drain();
  }
  void drain() {
    socket_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
      if (self->state_ != State::kDraining) return;
      self->drained_ += n;
      if (ec || self->drained_ > kDrainBytes) return self->close();
      self->drain();
    });
  }

  std::shared_ptr<HttpServer::Loop> loop_;  // first: outlives the socket and timer it owns the context of
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::optional<http::response_serializer<http::string_body>> serializer_;  // HEAD: the header alone
  bool head_only_ = false;
  std::array<char, 4096> scratch_{};
  State state_ = State::kIdle;
  std::size_t drained_ = 0;
  bool timed_out_ = false;
  bool keep_alive_ = false;
  unsigned version_ = 11;
};

int HttpServer::Loop::bind() {
  raise_descriptor_limit();
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(options.host, std::to_string(options.port), tcp::resolver::passive, ec);
  const auto fail = [&](const boost::system::error_code& why) {
    return InputError(fmt::format("cannot listen on {}:{}: {} (address in use, or not an address of this host?)",
                                  options.host, options.port, why.message()));
  };
  if (ec || endpoints.empty()) throw fail(ec);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor.open(endpoint.protocol(), ec);
  if (ec) throw fail(ec);
  // SO_REUSEADDR (not SO_REUSEPORT): a restarted server rebinds its port at once, yet a
  // second server on the same port fails instead of sharing it.
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (ec) throw fail(ec);
  acceptor.listen(asio::socket_base::max_listen_connections, ec);  // a thousand ranks connect at once
  if (ec) throw fail(ec);
  return acceptor.local_endpoint().port();
}

void HttpServer::Loop::accept() {
  acceptor.async_accept(asio::make_strand(io), [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
    if (!self->acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or another transient failure): try again shortly, not in a spin.
      self->accept_pause.expires_after(std::chrono::milliseconds(20));
      self->accept_pause.async_wait([self](boost::system::error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    boost::system::error_code ignored;
    // Answers go out as headers then body in one write, yet small answers to many clients
    // must not wait for delayed ACKs.
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(self, std::move(socket));
    {
      std::lock_guard lock(self->sessions_mutex);
      self->sessions.push_back(session);
      if (self->sessions.size() >= self->sweep_at) self->forget_closed_sessions();
    }
    self->accept();
    asio::dispatch(session->executor(), [session] { session->start(); });
  });
}

void HttpServer::Loop::forget_closed_sessions() {
  std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
  sweep_at = std::max<std::size_t>(1024, 2 * sessions.size());
}

void HttpServer::Loop::run() {
  if (stopped) return;
  accept();
  const auto serve = [this] {
    while (true) {
      try {
        io.run();
        break;
      } catch (const std::exception&) {
        // A handler that threw (it should not): keep serving the others.
      }
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t i = 1; i < options.io_threads; ++i) helpers.emplace_back(serve);
  serve();
  for (std::thread& t : helpers) t.join();
  // Every socket and timer is closed by now; their aborted operations still hold sessions
  // (and through them the loop). Running them lets both go.
  io.restart();
  io.poll();
  join_workers();
}

void HttpServer::Loop::stop() {
  if (stopped.exchange(true)) return;
  // Runs only inside run(), which the Loop outlives. The sessions close on their strands,
  // then the loop stops (posted after them).
  asio::post(io, [this] {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    accept_pause.cancel();
    std::lock_guard lock(sessions_mutex);
    for (const auto& weak : sessions) {
      if (auto session = weak.lock()) session->close_soon();
    }
    sessions.clear();
    asio::post(io, [this] { io.stop(); });
  });
}

HttpServer::HttpServer(Service& service, HttpOptions options)
    : loop_(std::make_shared<Loop>(service, std::move(options))) {}

HttpServer::~HttpServer() {
  stop();
  loop_->join_workers();
}

void HttpServer::bind() { port_ = loop_->bind(); }

void HttpServer::run() { loop_->run(); }

void HttpServer::start() {
  bind();
  thread_ = std::thread([this] { run(); });
}

void HttpServer::stop() {
  loop_->stop();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace perseus::server
