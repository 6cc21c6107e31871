#pragma once
// pagoda-loadgen's clients: they send a workload's turns to a backend (the in-process engine,
// static batches, or a server over HTTP), time each, and sum the run up.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/common/load_report.h"
#include "examples/loadgen/workload.h"

namespace pagoda::loadgen {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What a backend reports for one request: times from when it was sent.
struct Served {
  double ttft_s;
  double tpot_s;  // < 0 with one token
  int32_t tokens;
  int32_t preemptions;
  std::vector<int32_t> reply;  // the generated ids, for the next turn's prompt
  bool dropped = false;        // disconnected mid-stream on purpose
  int32_t prompt_tokens = 0;   // the prompt's positions as the engine counted them (an image's
                               // rows among them); 0: the ids sent
};

struct Gauge {
  int64_t pages_used, pages_total, generated_tokens;
};

struct Backend {
  std::string name;
  // Sends one turn of `conversation`, its context so far, and waits for it: a reply of the
  // conversation's output_len, and its image if it has one.
  std::function<Served(const std::vector<int32_t>& prompt, const Conversation& conversation)> serve;
  std::function<Gauge()> gauge;
};

// `concurrency` clients take conversations from a TurnQueue; a conversation's first turn waits
// for its arrival time. A turn whose time comes while every client is busy is sent late:
// client-side queueing is not counted in its latency, as with a real client's pool.
RunSummary drive(const Backend& backend, const std::vector<Conversation>& work, bool interleave_turns,
                 int32_t concurrency);

}  // namespace pagoda::loadgen
