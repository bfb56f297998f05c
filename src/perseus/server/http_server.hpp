// The HTTP layer: cpp-httplib in front of a Service. It only translates requests and
// responses; every route lives in the Service.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "perseus/model/errors.hpp"

namespace httplib {
class Server;
}
namespace spdlog {
class logger;
}

namespace perseus::server {

class Service;
class DeadlineServer;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 7787;  // 0: any free port (see HttpServer::port)
  // Connections are served by a pool that grows on demand up to this many threads: a
  // request waiting at a schedule barrier holds its thread, so a job of N ranks needs N.
  std::size_t max_threads = 4096;
  std::size_t payload_limit_bytes = 16u << 20;
  double read_timeout_s = 30.0;  // the most one read of a request may wait for bytes
  // A request's line, headers and body must all arrive within this many seconds (counted
  // from when a worker takes the connection up for its first request, from the first byte
  // for later keep-alive requests); else the connection is dropped (408 when a response can
  // still be written). Without it, a client sending a byte every few seconds held a
  // connection and a worker forever, every read being quick.
  double request_timeout_s = 10.0;
  // Seconds an idle keep-alive connection is kept (rounded up to whole seconds); 0 (the
  // default): one request per connection. Measured while cpp-httplib 0.11's own loop served
  // connections (polling every idle one about every 11 ms from its thread; now each waits in
  // poll(2), 50 ms at a time), a thousand ranks' idle connections cost more CPU than
  // reconnecting did (server_load_bench: 121 us of server CPU per request without keep-alive,
  // 259 us with 1 s, at 1,024 ranks). Clients reconnect by themselves.
  double keep_alive_s = 0.0;
};

class HttpServer {
 public:
  HttpServer(Service& service, HttpOptions options);
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
  void stop();

 private:
  Service& service_;
  HttpOptions options_;
  std::unique_ptr<DeadlineServer> server_;
  std::atomic<int> listen_fd_{-1};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace perseus::server
