#include "perseus/server/http_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <limits>
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
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/server/api.hpp"

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
// How often the loop looks for connections past their deadline. One sweep for all of them,
// instead of a timer per connection: re-arming an Asio timer at every step of every request
// (read, write, idle) cost a timer-queue update, often a timerfd_settime, and a cancelled
// wait run as a handler, three times a request. Deadlines are thus kept to this precision.
constexpr std::chrono::milliseconds kSweepPeriod{100};
constexpr Clock::rep kNever = std::numeric_limits<Clock::rep>::max();

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

// The event loops: `io_threads` of them, each an io_context run by one thread, with its own
// share of the connections (dealt round-robin as they are accepted), so that no lock is
// shared between loops on the way of a request (one io_context run by several threads
// serialised them on its scheduler's lock: on 16 cores, four threads answered 1.6x what one
// did). A connection's handlers all run on its loop's thread; an answer given on another
// thread (a worker, or the loop whose request released a round) is posted to it, so a
// released round's answers are written by every loop at once. A small pool runs the routes
// that may block. Shared with the sessions, so that an answer the handler gives after the
// server stopped finds the loops still there (and is dropped).
class HttpServer::Loop : public std::enable_shared_from_this<HttpServer::Loop> {
 public:
  Loop(RequestHandler& handler, HttpOptions options)
      : handler(handler),
        options(std::move(options)),
        contexts(make_contexts(event_loops(this->options.io_threads))),
        acceptor(*contexts.front()),
        // Settings written for the thread-per-connection front end asked for thousands.
        workers(std::clamp<std::size_t>(this->options.max_threads, 1, 256)),
        accept_pause(*contexts.front()),
        sweep_timer(*contexts.front()) {}

  int bind();
  void run();
  void stop();
  void join_workers() { std::call_once(workers_joined, [this] { workers.join(); }); }
  bool stopping() const { return stopped; }
  // A connection's new deadline: the sweep scans the connections only once the earliest
  // deadline set since its last scan has come (idle connections, with deadlines a minute or
  // more away, are then scanned about once a minute).
  void note_deadline(Clock::rep deadline) {
    Clock::rep earliest = earliest_deadline.load(std::memory_order_relaxed);
    while (deadline < earliest && !earliest_deadline.compare_exchange_weak(earliest, deadline)) {
    }
  }

  RequestHandler& handler;
  const HttpOptions options;  // before the contexts: its thread count sizes them
  std::vector<std::unique_ptr<asio::io_context>> contexts;  // one per loop thread; the first also accepts
  tcp::acceptor acceptor;
  asio::thread_pool workers;

 private:
  static std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t count) {
    std::vector<std::unique_ptr<asio::io_context>> made;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, count); ++i) made.push_back(std::make_unique<asio::io_context>(1));
    return made;
  }
  void accept();
  void forget_closed_sessions();
  void sweep();

  asio::steady_timer accept_pause;  // on the first loop, as the acceptor
  asio::steady_timer sweep_timer;   // on the first loop (it re-arms itself)
  std::size_t next_context = 0;     // the loop the next connection goes to (the first loop's)
  std::mutex sessions_mutex;
  std::vector<std::weak_ptr<Session>> sessions;  // for stop() and the deadline sweep
  std::size_t forget_at = 1024;
  std::atomic<bool> stopped{false};
  std::atomic<Clock::rep> earliest_deadline{kNever};
  std::once_flag workers_joined;
};

// One connection: waits for a request, reads it, hands it to the handler, writes the answer,
// and either waits for the next (keep-alive) or closes. Everything runs on its loop's thread;
// the handler's answer is posted back to it from whichever thread gave it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `socket` belongs to one loop (one thread): every handler below runs on it.
  Session(std::shared_ptr<HttpServer::Loop> loop, tcp::socket socket)
      : loop_(std::move(loop)), socket_(std::move(socket)) {}

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
    clear_deadline();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // From the sweep, on the first loop: a connection past its deadline times out on its own
  // loop, where the deadline is checked again (it may have moved since).
  // Returns the deadline if it is still to come (else kNever: the timeout is on its way).
  Clock::rep check_deadline(Clock::time_point now) {
    const Clock::rep deadline = deadline_.load(std::memory_order_relaxed);
    if (deadline > now.time_since_epoch().count()) return deadline;
    if (timeout_posted_.exchange(true)) return kNever;
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->timeout_posted_ = false;
      if (self->deadline_.load(std::memory_order_relaxed) > Clock::now().time_since_epoch().count()) return;
      self->deadline_ = kNever;
      self->on_timeout();
    });
    return kNever;
  }

 private:
  enum class State { kIdle, kReading, kParked, kWriting, kDraining, kClosed };

  // One deadline per connection: what passing it means depends on the state it was set in.
  void set_deadline(Clock::duration after) {
    const Clock::rep deadline = (Clock::now() + after).time_since_epoch().count();
    deadline_.store(deadline, std::memory_order_relaxed);
    loop_->note_deadline(deadline);
  }
  void clear_deadline() { deadline_.store(kNever, std::memory_order_relaxed); }

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
    set_deadline(seconds(idle_s));
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
    set_deadline(seconds(loop_->options.request_timeout_s));
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
    clear_deadline();
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
    loop_->handler.record_rejected(request, status);
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
    clear_deadline();
    state_ = State::kParked;
    const auto& message = parser_->get();
    keep_alive_ = loop_->options.keep_alive_s > 0 && message.keep_alive();
    version_ = message.version();
    ApiRequest request = to_api_request(/*with_body=*/true);
    // HEAD is GET without the body, as HTTP has it (probes send it).
    head_only_ = request.method == "HEAD";
    if (head_only_) request.method = "GET";
    // The answer comes on whichever thread the handler gives it (a worker, or the loop when
    // another rank's request released the round); it is written on this connection's loop,
    // at once when already there. A round's answers are thus written by every loop at once.
    RequestHandler::Responder respond = [self = shared_from_this()](ApiResponse response) {
      // Answers that come after the server stopped (its handler answering parked requests
      // as it shuts down) have no connection left to go to.
      if (self->loop_->stopping()) return;
      asio::dispatch(self->socket_.get_executor(),
                     [self, response = std::move(response)]() mutable { self->write(std::move(response)); });
    };
    if (loop_->handler.runs_on_loop(request)) {
      loop_->handler.handle_async(request, std::move(respond));
    } else {
      asio::post(loop_->workers, [loop = loop_, request = std::move(request), respond = std::move(respond)]() mutable {
        loop->handler.handle_async(request, std::move(respond));
      });
    }
  }

  void write(ApiResponse answer) {
    if (state_ == State::kClosed) return;
    state_ = State::kWriting;
    // The head written by hand, as Beast's serializer wrote it (the same fields in the same
    // order): a few hundred nanoseconds instead of a serializer's composed operation per answer.
    const auto status = static_cast<unsigned>(answer.status);
    const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(status));
    head_.clear();
    fmt::format_to(std::back_inserter(head_), "HTTP/1.{} {} {}\r\nContent-Type: {}\r\n", version_ == 10 ? 0 : 1,
                   status, std::string_view(reason.data(), reason.size()), answer.content_type);
    if (answer.status == 401) head_ += "WWW-Authenticate: Bearer\r\n";
    if (version_ == 10 && keep_alive_) head_ += "Connection: keep-alive\r\n";
    if (version_ != 10 && !keep_alive_) head_ += "Connection: close\r\n";
    fmt::format_to(std::back_inserter(head_), "Content-Length: {}\r\n\r\n", answer.body.size());
    body_ = head_only_ ? std::string() : std::move(answer.body);
    head_only_ = false;
    set_deadline(seconds(loop_->options.request_timeout_s));
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    asio::async_write(socket_, buffers, [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      self->clear_deadline();
      self->body_ = std::string();  // a page's megabytes are not kept for the next answer
      if (ec) return self->close();
      if (!self->keep_alive_) return self->drain_and_close();
      self->wait_for_request(self->loop_->options.keep_alive_s);
    });
  }

  // Half-closes, then reads what the client still sends until it closes too (or kDrainTime).
  void drain_and_close() {
    state_ = State::kDraining;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    drained_ = 0;
    set_deadline(kDrainTime);
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

  std::shared_ptr<HttpServer::Loop> loop_;  // first: outlives the socket it owns the context of
  tcp::socket socket_;
  std::atomic<Clock::rep> deadline_{kNever};  // written on its loop, read by the sweep
  std::atomic<bool> timeout_posted_{false};
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string head_, body_;  // the answer being written
  bool head_only_ = false;
  std::array<char, 4096> scratch_{};
  State state_ = State::kIdle;
  std::size_t drained_ = 0;
  bool timed_out_ = false;
  bool keep_alive_ = false;
  unsigned version_ = 11;
};

std::size_t event_loops(std::size_t io_threads) {
  if (io_threads > 0) return io_threads;
  return std::clamp<std::size_t>(std::thread::hardware_concurrency() / 2, 1, 8);
}

int HttpServer::Loop::bind() {
  raise_descriptor_limit();
  boost::system::error_code ec;
  tcp::resolver resolver(*contexts.front());
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
  asio::io_context& loop = *contexts[next_context];
  next_context = (next_context + 1) % contexts.size();
  acceptor.async_accept(loop, [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
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
      if (self->sessions.size() >= self->forget_at) self->forget_closed_sessions();
    }
    self->accept();
    asio::dispatch(session->executor(), [session] { session->start(); });
  });
}

void HttpServer::Loop::sweep() {
  sweep_timer.expires_after(kSweepPeriod);
  sweep_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->stopping()) return;
    const Clock::time_point now = Clock::now();
    if (self->earliest_deadline.load() <= now.time_since_epoch().count()) {
      // Deadlines set during the scan lower the earliest again themselves.
      self->earliest_deadline = kNever;
      Clock::rep earliest = kNever;
      {
        std::lock_guard lock(self->sessions_mutex);
        std::erase_if(self->sessions, [&](const std::weak_ptr<Session>& weak) {
          const auto session = weak.lock();
          if (session) earliest = std::min(earliest, session->check_deadline(now));
          return !session;  // closed: forgotten
        });
      }
      self->note_deadline(earliest);
    }
    self->sweep();
  });
}

void HttpServer::Loop::forget_closed_sessions() {
  std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
  forget_at = std::max<std::size_t>(1024, 2 * sessions.size());
}

void HttpServer::Loop::run() {
  if (stopped) return;
  accept();
  sweep();
  // A loop with no connection yet has no work: the guards keep every loop running until stop().
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  for (auto& context : contexts) guards.push_back(asio::make_work_guard(*context));
  const auto serve = [](asio::io_context& context) {
    while (true) {
      try {
        context.run();
        break;
      } catch (const std::exception&) {
        // A handler that threw (it should not): keep serving the others.
      }
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t i = 1; i < contexts.size(); ++i) helpers.emplace_back(serve, std::ref(*contexts[i]));
  serve(*contexts.front());
  for (std::thread& t : helpers) t.join();
  guards.clear();
  // Every socket and timer is closed by now; their aborted operations still hold sessions
  // (and through them the loop). Running them lets both go.
  for (auto& context : contexts) {
    context->restart();
    context->poll();
  }
  join_workers();
}

void HttpServer::Loop::stop() {
  if (stopped.exchange(true)) return;
  // Runs only inside run(), which the Loop outlives. The sessions close on their loops, then
  // every loop stops (posted to each after its sessions' closes, which run first).
  asio::post(*contexts.front(), [this] {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    accept_pause.cancel();
    sweep_timer.cancel();
    {
      std::lock_guard lock(sessions_mutex);
      for (const auto& weak : sessions) {
        if (auto session = weak.lock()) session->close_soon();
      }
      sessions.clear();
    }
    for (auto& context : contexts) asio::post(*context, [context = context.get()] { context->stop(); });
  });
}

HttpServer::HttpServer(RequestHandler& handler, HttpOptions options)
    : loop_(std::make_shared<Loop>(handler, std::move(options))) {}

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
