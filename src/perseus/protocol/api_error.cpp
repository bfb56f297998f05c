#include "perseus/protocol/api_error.hpp"

namespace perseus::protocol {

using json = nlohmann::json;

json error_body(std::string_view detail) { return json{{"detail", std::string(detail)}}; }

std::string error_detail(std::string_view body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("detail")) {
    const json& detail = parsed.at("detail");
    return detail.is_string() ? detail.get<std::string>() : detail.dump();
  }
  return std::string(body.substr(0, 500));
}

}  // namespace perseus::protocol
