// The HTTP layer: an event loop (Boost.Beast on Boost.Asio) in front of a RequestHandler (the
// server's Service, or the cluster scheduler's). It only reads requests, hands them to the
// handler and writes its answers; every route lives in the handler. A rank waiting at a schedule barrier is a parked request, holding a socket and a
// few hundred bytes but no thread: the loop writes every answer of a round when it is released.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "perseus/model/errors.hpp"
#include "perseus/server/api.hpp"

namespace perseus::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 7787;  // 0: any free port (see HttpServer::port)
  // Threads that run the routes which may block (SQLite writes, profile uploads, pages);
  // GET /schedule and /healthz run on the loop itself, and a parked request holds no thread.
  std::size_t max_threads = 4;
  // Event loops, each a thread with its share of the connections; a released round's answers
  // are written by all of them at once. 0: half the host's cores, 1 to 8 (measured on a
  // 16-core host with the ranks on the other 8: 8 loops answered 1,024 ranks 3.9x faster than
  // one; on a 2-core machine shared with the ranks' load, one answered a round's last rank 30%
  // sooner than two; docs/runtime.md, "Load").
  std::size_t io_threads = 0;
  std::size_t payload_limit_bytes = 16u << 20;  // chunked bodies included
  // A request's line, headers and body must all arrive within this many seconds of its
  // first byte; else it is answered 408 and its connection closed. Clients trickling bytes
  // cost a socket each, never a thread.
  double request_timeout_s = 10.0;
  // Seconds a connection may stay idle between requests; 0: one request per connection. An
  // idle connection costs the loop nothing, so the default outlasts any iteration: a rank
  // keeps its connection from round to round instead of a thousand ranks reconnecting at
  // every barrier (a burst of connection requests that a listen queue may drop, each then
  // retried by the kernel a second or more later).
  double keep_alive_s = 600.0;
  // Seconds a new connection may wait for its first request (at least keep_alive_s): clients
  // that connect early and ask later are answered, as zeus's server answers them.
  double first_request_idle_s = 60.0;
};

// HttpOptions::io_threads with 0 resolved for this host.
std::size_t event_loops(std::size_t io_threads);

class HttpServer {
 public:
  HttpServer(RequestHandler& handler, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; throws InputError naming the address when it cannot.
  void bind();
  int port() const { return port_; }
  // Serves until stop(); call bind() first.
  void run();
  // bind() and run() on a background thread.
  void start();
  // Stops accepting and serving; run() returns. Requests still parked in the Service are
  // dropped when the Service answers them. Safe to call from any thread, more than once.
  void stop();

  class Loop;  // the event loop, its sessions and its worker threads (http_server.cpp)

 private:
  std::shared_ptr<Loop> loop_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace perseus::server
