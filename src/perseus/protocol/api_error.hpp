// A message one side of the protocol refuses, and the error body that carries it: the
// server answers {"detail": "..."} with the status, the client reads the detail back.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace perseus::protocol {

// A request (or an answer) that is refused: answered with `status` and {"detail": what()}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& detail) : std::runtime_error(detail), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// {"detail": detail}, the error body of the existing server.
nlohmann::json error_body(std::string_view detail);
// The detail of an error body; the body itself (at most 500 bytes) when it is not one.
std::string error_detail(std::string_view body);

}  // namespace perseus::protocol
