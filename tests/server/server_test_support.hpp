// Helpers for the server tests: calling a Service's routes without sockets, registering
// jobs and ranks, and fetching one barrier round for every rank at once.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "perseus/server/service.hpp"
#include "temp_dir.hpp"

namespace perseus::server::testing {

using json = nlohmann::json;
using perseus::testing::TempDir;

inline ApiResponse call(Service& service, const std::string& method, const std::string& path,
                        const std::string& body = "", std::map<std::string, std::string> query = {},
                        const std::string& authorization = "") {
  ApiRequest request{method, path, std::move(query), body, authorization};
  return service.handle(request);
}

inline json body_of(const ApiResponse& response) {
  return json::parse(response.body, nullptr, false);
}

inline json job_info(int pp, int dp, int tp, json extra = json::object()) {
  json info = {{"job_id", ""}, {"pp_degree", pp}, {"dp_degree", dp}, {"tp_degree", tp},
               {"world_size", pp * dp * tp}, {"job_metadata", nullptr}};
  info.update(extra);
  return info;
}

// Rank layout used throughout the tests: tp fastest, then pp, then dp.
inline int rank_of(int pp, int tp, int dp_rank, int pp_rank, int tp_rank) {
  return (dp_rank * pp + pp_rank) * tp + tp_rank;
}

inline std::string register_job(Service& service, int pp, int dp, int tp, json extra = json::object()) {
  const ApiResponse response = call(service, "POST", "/register_job", job_info(pp, dp, tp, extra).dump());
  EXPECT_EQ(response.status, 200) << response.body;
  return body_of(response).get<std::string>();
}

inline void register_ranks(Service& service, const std::string& job_id, int pp, int dp, int tp,
                           const std::vector<int>& frequencies) {
  for (int d = 0; d < dp; ++d) {
    for (int p = 0; p < pp; ++p) {
      for (int t = 0; t < tp; ++t) {
        const json rank = {{"rank", rank_of(pp, tp, d, p, t)}, {"dp_rank", d}, {"pp_rank", p}, {"tp_rank", t},
                           {"available_frequencies", frequencies}};
        const ApiResponse response = call(service, "POST", "/register_rank/" + job_id, rank.dump());
        ASSERT_EQ(response.status, 200) << response.body;
        ASSERT_EQ(response.body, "null");
      }
    }
  }
}

// Every rank asks for its schedule at once (the barrier releases only then); the answers
// by rank.
inline std::vector<ApiResponse> fetch_round(Service& service, const std::string& job_id, int world_size) {
  std::vector<std::future<ApiResponse>> pending;
  for (int r = 0; r < world_size; ++r) {
    pending.push_back(std::async(std::launch::async, [&service, job_id, r] {
      return call(service, "GET", "/schedule/" + job_id, "", {{"rank", std::to_string(r)}});
    }));
  }
  std::vector<ApiResponse> out;
  for (auto& f : pending) out.push_back(f.get());
  return out;
}

// The (name, MHz) list of a FrequencySchedule answer.
inline StageFrequencies frequencies_of(const ApiResponse& response) {
  StageFrequencies out;
  const json body = body_of(response);
  for (const auto& entry : body.at("frequencies")) out.emplace_back(entry.at(0).get<std::string>(), entry.at(1).get<int>());
  return out;
}

}  // namespace perseus::server::testing
