#include "perseus/client/server_connection.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "perseus/model/errors.hpp"
#include "perseus/protocol/api_error.hpp"

namespace perseus::client {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// "http://host[:port]" with nothing after it but an optional '/'.
void check_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0 || url.size() == scheme.size()) {
    throw InputError(fmt::format("server URL '{}': expected http://host[:port]", url));
  }
  const std::string rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  if (slash != std::string::npos && slash + 1 != rest.size()) {
    throw InputError(fmt::format("server URL '{}': expected http://host[:port] without a path", url));
  }
  for (char c : rest.substr(0, slash)) {
    if (c <= ' ' || c == '@' || c == '?' || c == '#') {
      throw InputError(fmt::format("server URL '{}': the host part holds '{}'", url, c));
    }
  }
}

json parse_answer(const std::string& body, const std::string& what) {
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded()) {
    throw ServerError(200, "not JSON", fmt::format("{}: the server's answer is not JSON: {}", what, body.substr(0, 200)));
  }
  return parsed;
}

std::string format_number(double value) { return fmt::format("{}", value); }

}  // namespace

std::string encode_path_segment(const std::string& segment) {
  std::string out;
  out.reserve(segment.size());
  for (unsigned char c : segment) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '~' || c == '+' || c == '=' || c == ',' || c == ':';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

ServerConnection::ServerConnection(ConnectionOptions options) : options_(std::move(options)) {
  check_url(options_.url);
  std::string base = options_.url;
  if (base.back() == '/') base.pop_back();
  http_ = std::make_unique<httplib::Client>(base);
  if (!http_->is_valid()) throw InputError(fmt::format("server URL '{}': not a valid http URL", options_.url));
  const auto set_timeout = [](auto setter, double seconds) {
    const auto whole = static_cast<time_t>(std::floor(seconds));
    setter(whole, static_cast<time_t>((seconds - static_cast<double>(whole)) * 1e6));
  };
  set_timeout([&](time_t s, time_t us) { http_->set_connection_timeout(s, us); }, options_.connect_timeout_s);
  set_timeout([&](time_t s, time_t us) { http_->set_read_timeout(s, us); }, options_.read_timeout_s);
  set_timeout([&](time_t s, time_t us) { http_->set_write_timeout(s, us); }, options_.connect_timeout_s + 25.0);
  http_->set_keep_alive(true);
  http_->set_tcp_nodelay(true);  // a request is written as headers then body: no Nagle delay between
  if (!options_.token.empty()) http_->set_bearer_token_auth(options_.token.c_str());
}

ServerConnection::~ServerConnection() = default;

void ServerConnection::close() { http_->stop(); }

ServerConnection::Answer ServerConnection::request(const char* method, const std::string& path,
                                                   const std::string& body, const char* content_type) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.retry_for_s);
  // The first retry is immediate: a kept-alive connection the server closed meanwhile fails
  // on write, and a new one is all it takes.
  std::chrono::milliseconds backoff(0);
  std::lock_guard lock(mutex_);
  for (;;) {
    httplib::Result result = std::string_view(method) == "GET" ? http_->Get(path.c_str())
                                                                : http_->Post(path.c_str(), body, content_type);
    std::string failure;
    if (!result) {
      failure = httplib::to_string(result.error());
    } else if (result->status == 502 || result->status == 503 || result->status == 504) {
      failure = fmt::format("HTTP {}: {}", result->status, protocol::error_detail(result->body));
    } else if (result->status >= 200 && result->status < 300) {
      return Answer{result->status, std::move(result->body)};
    } else {
      const std::string detail = protocol::error_detail(result->body);
      throw ServerError(result->status, detail,
                        fmt::format("{} {}{}: HTTP {}: {}", method, options_.url, path, result->status, detail));
    }
    if (Clock::now() + backoff > deadline) {
      throw ServerError(result ? result->status : 0, failure,
                        fmt::format("{} {}{}: {}{}", method, options_.url, path, failure,
                                    options_.retry_for_s > 0 ? fmt::format(" (retried for {} s)", options_.retry_for_s)
                                                             : std::string()));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::clamp(backoff * 2, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }
}

std::string ServerConnection::register_job(const JobInfo& info) {
  const Answer answer = request("POST", "/register_job", protocol::to_json(info).dump(), "application/json");
  const json id = parse_answer(answer.body, "POST /register_job");
  if (!id.is_string() || id.get<std::string>().empty()) {
    throw ServerError(answer.status, "not a job id",
                      "POST /register_job: the server answered " + answer.body.substr(0, 200) + ", not a job id");
  }
  return id.get<std::string>();
}

void ServerConnection::register_rank(const std::string& job_id, const RankInfo& info) {
  request("POST", "/register_rank/" + encode_path_segment(job_id), protocol::to_json(info).dump(), "application/json");
}

StageFrequencies ServerConnection::get_schedule(const std::string& job_id, int rank, std::optional<std::uint64_t> round) {
  std::string path = fmt::format("/schedule/{}?rank={}", encode_path_segment(job_id), rank);
  if (round) path += fmt::format("&round={}", *round);
  const Answer answer = request("GET", path, "", nullptr);
  try {
    return protocol::parse_frequency_schedule(parse_answer(answer.body, "GET " + path), rank);
  } catch (const protocol::ApiError& e) {
    throw ServerError(answer.status, e.what(), fmt::format("GET {}: a malformed schedule: {}", path, e.what()));
  }
}

void ServerConnection::post_result(const std::string& job_id, const ProfilingResult& result) {
  request("POST", "/result/" + encode_path_segment(job_id), protocol::to_json(result).dump(), "application/json");
}

nlohmann::json ServerConnection::upload_profile(const std::string& job_id, const std::string& csv, double p_blocking,
                                                double unit_time, const std::optional<PipelineLayout>& layout) {
  std::string path = "/profile/" + encode_path_segment(job_id);
  std::vector<std::string> query;
  if (p_blocking > 0) query.push_back("p_blocking=" + format_number(p_blocking));
  if (unit_time > 0) query.push_back("unit_time=" + format_number(unit_time));
  if (layout) {
    query.push_back(fmt::format("microbatches={}", layout->microbatches));
    query.push_back(fmt::format("schedule={}", to_string(layout->kind)));
    query.push_back(fmt::format("chunks={}", layout->chunks));
  }
  for (std::size_t i = 0; i < query.size(); ++i) path += (i == 0 ? "?" : "&") + query[i];
  const Answer answer = request("POST", path, csv, "text/csv");
  return parse_answer(answer.body, "POST " + path);
}

nlohmann::json ServerConnection::announce_straggler(const StragglerNotice& notice) {
  const Answer answer = request("POST", "/straggler", protocol::to_json(notice).dump(), "application/json");
  return parse_answer(answer.body, "POST /straggler");
}

nlohmann::json ServerConnection::get_json(const std::string& path) {
  const Answer answer = request("GET", path, "", nullptr);
  return parse_answer(answer.body, "GET " + path);
}

}  // namespace perseus::client
