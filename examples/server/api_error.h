#pragma once
// An HTTP error the server answers with, in OpenAI's error JSON:
// {"error": {"message": ..., "type": ..., "code": ...}}.

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message), status_(status), type_(std::move(type)), code_(std::move(code)) {}

  int status() const { return status_; }

  nlohmann::json body() const {
    nlohmann::json code = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
    return {{"error", {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", code}}}};
  }

 private:
  int status_;
  std::string type_;
  std::string code_;
};

inline ApiError bad_request(const std::string& message) { return ApiError(400, message); }

}  // namespace pagoda::server
