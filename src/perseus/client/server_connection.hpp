// One connection to a perseus server (or any server speaking the existing zeus/Perseus
// protocol, docs/runtime.md, "The server"), over cpp-httplib: the protocol's routes plus the
// ones perseus adds (profile upload, straggler notices, job state).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/protocol/protocol.hpp"

namespace httplib {
class Client;
}

namespace perseus::client {

using protocol::JobInfo;
using protocol::PipelineLayout;
using protocol::ProfilingResult;
using protocol::RankInfo;
using protocol::StragglerNotice;

// The server refused a request (status >= 400, `detail` its explanation), answered
// something that is not the protocol (status 200..299, detail says what), or could not be
// reached (status 0).
class ServerError : public std::runtime_error {
 public:
  ServerError(int status, std::string detail, const std::string& what)
      : std::runtime_error(what), status_(status), detail_(std::move(detail)) {}
  int status() const { return status_; }
  const std::string& detail() const { return detail_; }

 private:
  int status_;
  std::string detail_;
};

struct ConnectionOptions {
  std::string url = "http://127.0.0.1:7787";  // scheme://host:port (http only)
  std::string token;                          // sent as "Authorization: Bearer <token>" when set
  double connect_timeout_s = 5.0;
  // A schedule request waits at the server's barrier for every rank of the job: this must
  // exceed the server's --barrier-timeout (600 s by default).
  double read_timeout_s = 900.0;
  // Transport failures and 502/503/504 answers are retried with backoff for this long, so
  // that ranks ride out a server restart. 0: no retries.
  double retry_for_s = 60.0;

  // The defaults with `url` (and `token`).
  static ConnectionOptions to(std::string url, std::string token = "") {
    ConnectionOptions options;
    options.url = std::move(url);
    options.token = std::move(token);
    return options;
  }
};

// Thread-safe (requests on one connection are serialised). Every method throws ServerError.
class ServerConnection {
 public:
  // InputError when the URL is not http://host[:port].
  explicit ServerConnection(ConnectionOptions options);
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  const ConnectionOptions& options() const { return options_; }

  // POST /register_job: the job id the server assigned.
  std::string register_job(const JobInfo& info);
  // POST /register_rank/{job_id}.
  void register_rank(const std::string& job_id, const RankInfo& info);
  // GET /schedule/{job_id}?rank=R[&round=N]: blocks until every rank of the job has asked.
  // `round` (a perseus extension) numbers the rounds this rank has received, from 0, so that
  // a retried request for a round already released is answered instead of joining the next.
  StageFrequencies get_schedule(const std::string& job_id, int rank, std::optional<std::uint64_t> round = std::nullopt);
  // POST /result/{job_id}.
  void post_result(const std::string& job_id, const ProfilingResult& result);
  // POST /profile/{job_id}?p_blocking=..&unit_time=..&microbatches=..&schedule=..&chunks=..
  // (parameters left at 0 / unset are not sent). The server's answer.
  nlohmann::json upload_profile(const std::string& job_id, const std::string& csv, double p_blocking,
                                double unit_time = 0.0, const std::optional<PipelineLayout>& layout = std::nullopt);
  // POST /straggler. The server's answer (T', T_opt, the frontier point, replan time).
  nlohmann::json announce_straggler(const StragglerNotice& notice);
  // GET of any JSON route ("/info", "/api/jobs", "/healthz").
  nlohmann::json get_json(const std::string& path);

  // Closes the keep-alive connection (a request in flight fails); a later request opens a
  // new one. May be called from any thread.
  void close();

 private:
  struct Answer {
    int status = 0;
    std::string body;
  };
  // Sends one request, retrying transport failures and 502/503/504 within retry_for_s;
  // ServerError for any final status outside 2xx.
  Answer request(const char* method, const std::string& path, const std::string& body,
                 const char* content_type);

  ConnectionOptions options_;
  std::mutex mutex_;
  std::unique_ptr<httplib::Client> http_;
};

// Percent-encodes one URL path segment (job ids carry '+', and metadata may carry spaces).
std::string encode_path_segment(const std::string& segment);

}  // namespace perseus::client
