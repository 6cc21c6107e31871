#include "examples/loadgen/http_client.h"

#include <chrono>
#include <regex>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "pagoda/error.h"

namespace pagoda::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

HttpClient::HttpClient(std::string url) : url_(std::move(url)) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
}

StreamedCompletion HttpClient::complete(const std::vector<int32_t>& prompt, int32_t max_tokens, float temperature,
                                        uint64_t seed, int32_t drop_after) const {
  httplib::Client client(url_);
  client.set_read_timeout(600);
  const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", temperature},
                               {"seed", seed},     {"ignore_eos", true},       {"stream", true}};
  StreamedCompletion out;
  std::string buffer;
  bool done = false;
  int32_t chunks = 0;
  Clock::time_point first, last;
  const Clock::time_point sent = Clock::now();

  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    buffer.append(data, size);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string event = buffer.substr(0, end);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const nlohmann::json chunk = nlohmann::json::parse(payload);
      if (chunk.contains("error")) throw Error("the server's stream ended with " + payload);
      if (chunk.contains("usage") && chunk["usage"].is_object())
        out.tokens = chunk["usage"]["completion_tokens"].get<int32_t>();
      if (chunk["choices"].empty() || chunk["choices"][0]["text"].get<std::string>().empty()) continue;
      last = Clock::now();
      if (chunks++ == 0) first = last;
      if (drop_after > 0 && chunks >= drop_after) {
        out.dropped = true;
        return false;  // closes the connection mid-stream
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client.send(req, res, error);
  if (!out.dropped) {
    if (!ok) throw Error(url_ + ": " + httplib::to_string(error));
    if (res.status != 200) throw Error(url_ + ": HTTP " + std::to_string(res.status) + " " + res.body);
    if (!done) throw Error(url_ + ": the stream ended without [DONE]");
  } else {
    out.tokens = chunks;
  }
  out.ttft_s = chunks > 0 ? seconds(first - sent) : seconds(Clock::now() - sent);
  out.tpot_s = chunks > 1 ? seconds(last - first) / double(chunks - 1) : -1.0;
  return out;
}

ServerGauges HttpClient::gauges() const {
  httplib::Client client(url_);
  const httplib::Result res = client.Get("/metrics");
  if (!res || res->status != 200) throw Error(url_ + "/metrics: no answer");
  auto value = [&](const char* name) {
    const std::regex line(std::string("\n") + name + " ([0-9.e+-]+)");
    std::smatch m;
    return std::regex_search(res->body, m, line) ? int64_t(std::stod(m[1].str())) : int64_t(0);
  };
  return {value("pagoda_kv_pages_used"), value("pagoda_kv_pages_total"), value("pagoda_generation_tokens_total"),
          value("pagoda_num_requests_running")};
}

}  // namespace pagoda::loadgen
