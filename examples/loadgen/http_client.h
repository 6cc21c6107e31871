#pragma once
// pagoda-loadgen's client for a running pagoda-server: one streamed /v1/completions request at a
// time per client, timed as the tokens arrive, optionally dropped mid-stream; and the server's
// KV and token gauges from /metrics.

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::loadgen {

struct StreamedCompletion {
  double ttft_s = 0.0;   // from sending to the first text chunk
  double tpot_s = -1.0;  // mean gap between chunks after the first; < 0 with one
  int32_t tokens = 0;    // the usage's completion_tokens, or the chunks seen when dropped
  bool dropped = false;  // the client disconnected mid-stream
};

struct ServerGauges {
  int64_t pages_used = 0, pages_total = 0, generated_tokens = 0, running = 0;
};

class HttpClient {
 public:
  // `url`: http://HOST:PORT of a pagoda-server.
  explicit HttpClient(std::string url);

  // Streams a greedy-or-sampled completion of `prompt` ids with exactly `max_tokens` tokens
  // (ignore_eos); with `drop_after` > 0, disconnects after that many chunks. Throws
  // pagoda::Error for an HTTP error or a stream that ends without [DONE].
  StreamedCompletion complete(const std::vector<int32_t>& prompt, int32_t max_tokens, float temperature, uint64_t seed,
                              int32_t drop_after) const;

  ServerGauges gauges() const;

 private:
  std::string url_;
};

}  // namespace pagoda::loadgen
