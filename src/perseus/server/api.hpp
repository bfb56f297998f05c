// What a route handler sees and answers, independent of any HTTP library, so that every
// handler can be called from a unit test without sockets.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "perseus/protocol/api_error.hpp"
#include "perseus/protocol/protocol.hpp"

namespace perseus::server {

// The server speaks the protocol throughout: its messages and errors under the server's names.
using protocol::ApiError;
using protocol::frequency_schedule_json;
using protocol::JobInfo;
using protocol::make_job_id;
using protocol::parse_frequency_schedule;
using protocol::parse_job_info;
using protocol::parse_json_object;
using protocol::parse_layout;
using protocol::parse_profiling_result;
using protocol::parse_rank_info;
using protocol::parse_straggler_notice;
using protocol::PipelineLayout;
using protocol::ProfilingResult;
using protocol::RankInfo;
using protocol::stage_instruction_names;
using protocol::StragglerNotice;
using protocol::to_json;

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path, e.g. "/schedule/2024-01-01-00-00-00+dp1+pp2+tp1+Frontier"
  std::map<std::string, std::string> query;
  std::string body;
  std::string authorization;  // the Authorization header, "" when absent
};

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

ApiResponse json_response(int status, const nlohmann::json& body);
// {"detail": detail}, the error body of the existing server.
ApiResponse error_response(int status, std::string_view detail);

// What the HTTP front end (http_server.hpp) serves: `perseus serve`'s Service and `perseus
// cluster serve`'s ClusterService route requests; the front end only reads and writes them.
class RequestHandler {
 public:
  using Responder = std::function<void(ApiResponse)>;
  virtual ~RequestHandler() = default;
  // Answers by calling `respond` exactly once, from this thread or another (a request may be
  // parked and answered later). Must not throw; `respond` must not throw either.
  virtual void handle_async(const ApiRequest& request, Responder respond) = 0;
  // Counts a request the HTTP layer refused before routing (oversized, malformed).
  virtual void record_rejected(const ApiRequest& request, int status) = 0;
  // Whether the route never blocks, so that the event loop runs it itself instead of handing
  // it to a worker thread and back.
  virtual bool runs_on_loop(const ApiRequest& request) const = 0;
};

// Throws ApiError 401 unless the request's Authorization header is "Bearer <token>" (compared
// in constant time, so answer times say nothing of the token's bytes).
void require_bearer_token(const ApiRequest& request, std::string_view token);

// `value` as one logfmt value: bare when it is safe, else quoted with \" \\ \n \r \t and
// \u00XX escaped, so that user input (job ids carry job_metadata, paths, error texts that
// echo bodies) can never end the value or forge fields and lines. Every log line that
// carries such a value writes it through this.
std::string logfmt_value(std::string_view value);

}  // namespace perseus::server
