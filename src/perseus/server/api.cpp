#include "perseus/server/api.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace perseus::server {

using json = nlohmann::json;

ApiResponse json_response(int status, const nlohmann::json& body) {
  return ApiResponse{status, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

ApiResponse error_response(int status, std::string_view detail) {
  return json_response(status, protocol::error_body(detail));
}

void require_bearer_token(const ApiRequest& request, std::string_view token) {
  constexpr std::string_view kBearer = "Bearer ";
  const std::string_view header = request.authorization;
  bool ok = header.size() > kBearer.size() && header.substr(0, kBearer.size()) == kBearer;
  if (ok) {
    const std::string_view given = header.substr(kBearer.size());
    unsigned char diff = given.size() == token.size() ? 0 : 1;
    for (std::size_t i = 0; i < std::min(given.size(), token.size()); ++i)
      diff |= static_cast<unsigned char>(given[i] ^ token[i]);
    ok = diff == 0;
  }
  if (!ok) throw ApiError(401, "this route needs 'Authorization: Bearer <token>' with the server's token");
}

std::string logfmt_value(std::string_view value) {
  const bool bare = !value.empty() && std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f || c == '"' || c == '=' || c == '\\';
  });
  if (bare) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace perseus::server
