// pagoda._core: the Python binding over pagoda's public C++ API (include/pagoda), nothing else.
// The Pythonic layer (Engine, AsyncEngine, SamplingParams) is in python/pagoda/*.py.
//
// Threads and the GIL: every call that may block or take long (loading, submit, waiting, shutdown,
// tokenizing) runs with the GIL released. The engine's threads touch Python only in a request's
// on_token callback and in an async request's forwarder thread, and take the GIL there. Python
// objects that C++ threads hold are shared through SharedObject, so copying a callback never
// touches a reference count without the GIL, and the last owner drops it with the GIL.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "protocol/chat_reply.h"
#include "engine/util/json_depth.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "python/chat_prompt.h"

namespace py = pybind11;
using namespace std::chrono_literals;

namespace {

// Waits are cut into slices this long, so Ctrl-C (a pending signal) ends a blocked call.
constexpr auto kSignalCheck = 100ms;

// The engine's text as a Python str. The engine only hands out whole UTF-8 characters (its
// stream decoder holds an incomplete one back and replaces invalid bytes); "replace" covers
// detokenize() of arbitrary ids, which may end inside a character.
py::str utf8(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// Raises pagoda.Error when `value` (dicts, lists and tuples, the containers json.dumps walks)
// nests deeper than kMaxJsonDepth, the engine's bound on JSON from a user: json.dumps of a
// deeper value would recurse into RecursionError (or, on a small thread stack, past the
// stack's end). Iterative; a cycle is reported as too deep as soon as it passes the limit.
void check_json_depth(const py::handle& value, const std::string& what) {
  std::vector<std::pair<PyObject*, size_t>> pending{{value.ptr(), 0}};  // an object, the containers around it
  while (!pending.empty()) {
    const auto [o, around] = pending.back();
    pending.pop_back();
    const bool dict = PyDict_Check(o), list = PyList_Check(o), tuple = PyTuple_Check(o);
    if (!dict && !list && !tuple) continue;
    if (around >= pagoda::kMaxJsonDepth) throw pagoda::Error(pagoda::json_depth_error(what));
    if (dict) {
      Py_ssize_t at = 0;
      PyObject *key, *child;
      while (PyDict_Next(o, &at, &key, &child)) pending.emplace_back(child, around + 1);
    } else {
      const Py_ssize_t n = list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
      for (Py_ssize_t i = 0; i < n; ++i)
        pending.emplace_back(list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i), around + 1);
    }
  }
}

// A Python object C++ threads may hold and copy without the GIL.
class SharedObject {
 public:
  explicit SharedObject(py::object obj) : holder_(std::make_shared<Holder>(std::move(obj))) {}
  const py::object& get() const { return holder_->obj; }  // only with the GIL

 private:
  struct Holder {
    explicit Holder(py::object o) : obj(std::move(o)) {}
    ~Holder() {
      if (!Py_IsInitialized()) {  // after the interpreter is gone: nothing to give back to
        obj.release();
        return;
      }
      py::gil_scoped_acquire gil;
      obj = py::object();
    }
    py::object obj;
  };
  std::shared_ptr<Holder> holder_;
};

// Raises SIGINT's KeyboardInterrupt (or any pending signal's exception) in a GIL-free wait.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// The exception a request's Python callback raised, kept for the request's caller. Read and
// written with the GIL only.
struct CallbackFailure {
  std::optional<SharedObject> exception;
};

// Keeps an engine thread's Python thread state from one callback to the next: pybind11 would
// create and delete one for every call, most of a callback's cost. Deleted when the thread ends
// (the engine shuts down with the GIL released, so the thread can take it then).
struct ThreadStateKeeper {
  bool kept = false;
  ~ThreadStateKeeper() {
    if (!kept || !Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    gil.dec_ref();  // the reference keep() added: the state goes with this scope
  }
  void keep(py::gil_scoped_acquire& gil) {
    if (kept) return;
    gil.inc_ref();
    kept = true;
  }
};
thread_local ThreadStateKeeper thread_state_keeper;

// Request::on_token for a Python callable: takes the GIL, calls it with a Delta, and on an
// exception keeps it and throws, so the engine ends that request (and only that one) with an error.
struct PythonTokenCallback {
  SharedObject fn;
  std::shared_ptr<CallbackFailure> failure;

  void operator()(const pagoda::StreamEvent& event) const {
    py::gil_scoped_acquire gil;
    thread_state_keeper.keep(gil);
    try {
      fn.get()(event);
    } catch (py::error_already_set& e) {
      failure->exception.emplace(e.value());
      throw std::runtime_error(e.what());
    }
  }
};

// A submitted request as Python sees it: its result, its cancel, its pull stream, and for async
// requests the thread that forwards its stream and end to an asyncio loop.
class Handle {
 public:
  Handle(pagoda::RequestHandle handle, std::shared_ptr<CallbackFailure> failure, bool streaming)
      : handle_(std::move(handle)),
        result_(handle_.future().share()),
        failure_(std::move(failure)),
        streaming_(streaming) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // An async request dropped before its end is cancelled: its forwarder would otherwise keep the
  // dropping thread (the event loop's) waiting for the whole request.
  ~Handle() {
    if (!forwarder_.joinable()) return;
    handle_.cancel();
    if (forwarder_.get_id() == std::this_thread::get_id()) {  // its sink held the last reference
      forwarder_.detach();                                    // it is past its last use of this Handle
      return;
    }
    py::gil_scoped_release release;  // the forwarder may be waiting for the GIL
    forwarder_.join();
  }

  uint64_t id() const { return handle_.id(); }
  void cancel() { handle_.cancel(); }
  bool done() const { return result_.wait_for(0s) == std::future_status::ready; }

  // The Completion; raises what the request's callback raised, or pagoda.Error for a request the
  // engine refused (unknown adapter, lost model), or TimeoutError after `timeout` seconds.
  pagoda::Completion result(std::optional<double> timeout) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout.value_or(0.0)));
    {
      py::gil_scoped_release release;
      for (;;) {
        const auto slice =
            timeout ? std::min<Clock::duration>(kSignalCheck, std::max(deadline - Clock::now(), Clock::duration(0)))
                    : Clock::duration(kSignalCheck);
        if (result_.wait_for(slice) == std::future_status::ready) break;
        check_signals();
        if (timeout && Clock::now() >= deadline) {
          py::gil_scoped_acquire gil;
          PyErr_SetString(PyExc_TimeoutError, "the request has not finished yet");
          throw py::error_already_set();
        }
      }
    }
    const pagoda::Completion& c = result_.get();
    if (c.finish_reason == pagoda::FinishReason::Error) {
      if (failure_ && failure_->exception) {
        const py::object& e = failure_->exception->get();
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(e.ptr())), e.ptr());
        throw py::error_already_set();
      }
      throw pagoda::Error(c.error);
    }
    return c;
  }

  // The next piece of a streamed request, or None once it has ended (GIL released while waiting).
  std::optional<pagoda::StreamEvent> next_delta() {
    py::gil_scoped_release release;
    for (;;) {
      if (auto event = handle_.next_token(std::chrono::duration_cast<std::chrono::milliseconds>(kSignalCheck)))
        return event;
      if (handle_.stream_ended()) return std::nullopt;
      check_signals();
    }
  }

  // Starts a thread that hands this request's output to an asyncio loop:
  // loop.call_soon_threadsafe(sink, [Delta, ...]) for the deltas that are ready (a batch, so a busy
  // stream takes the GIL once per batch, not per token), then loop.call_soon_threadsafe(sink, None)
  // once the request has finished. The engine's scheduler never waits for the GIL.
  void forward_to(py::object loop, py::object sink) {
    if (forwarder_.joinable()) throw pagoda::Error("this request is already forwarded to a loop");
    forwarder_ = std::thread(
        [this, result = result_, loop = SharedObject(std::move(loop)), sink = SharedObject(std::move(sink))] {
          std::vector<pagoda::StreamEvent> batch;
          // False once the loop no longer takes calls (closed): the request is then cancelled.
          auto post = [&](bool end) {
            py::gil_scoped_acquire gil;
            try {
              py::object items = end ? py::object(py::none()) : py::object(py::cast(batch));
              loop.get().attr("call_soon_threadsafe")(sink.get(), items);
              batch.clear();
              return true;
            } catch (py::error_already_set&) {
              return false;
            }
          };
          bool delivering = true;
          while (streaming_ && delivering) {
            std::optional<pagoda::StreamEvent> event = handle_.next_token();
            if (!event) break;
            batch.push_back(std::move(*event));
            while (auto more = handle_.next_token(0ms)) batch.push_back(std::move(*more));
            if (!post(false)) {
              delivering = false;
              handle_.cancel();
            }
          }
          result.wait();
          if (delivering) post(true);
        });
  }

 private:
  pagoda::RequestHandle handle_;
  std::shared_future<pagoda::Completion> result_;  // shared: the forwarder waits on its own copy
  std::shared_ptr<CallbackFailure> failure_;
  bool streaming_;
  std::thread forwarder_;
};

// The Engine, closable from Python. Calls take their own reference to the C++ engine and drop it
// with the GIL released, so close() (or the last reference) shuts the engine down while no
// thread holds the GIL that its callbacks need.
class PyEngine {
 public:
  explicit PyEngine(const pagoda::EngineConfig& config) : engine_(std::make_shared<pagoda::Engine>(config)) {}
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;
  ~PyEngine() { close(); }

  void close() {
    std::shared_ptr<pagoda::Engine> engine = std::exchange(engine_, nullptr);
    if (!engine) return;
    py::gil_scoped_release release;
    engine->shutdown();
    engine.reset();
  }

  bool closed() const { return !engine_; }

  // Runs fn(engine) with the GIL released.
  template <class Fn>
  auto call(Fn&& fn) {
    if (!engine_) throw pagoda::Error("the engine is closed");
    std::shared_ptr<pagoda::Engine> taken = engine_;
    py::gil_scoped_release release;
    std::shared_ptr<pagoda::Engine> engine = std::move(taken);  // dropped before the GIL comes back
    return fn(*engine);
  }

  std::unique_ptr<Handle> submit(pagoda::Request request, std::optional<py::object> on_token) {
    std::shared_ptr<CallbackFailure> failure;
    if (on_token && !on_token->is_none()) {
      failure = std::make_shared<CallbackFailure>();
      request.on_token = PythonTokenCallback{SharedObject(std::move(*on_token)), failure};
    }
    const bool streaming = request.stream;
    pagoda::RequestHandle handle = call([&](pagoda::Engine& e) { return e.submit(std::move(request)); });
    return std::make_unique<Handle>(std::move(handle), std::move(failure), streaming);
  }

 private:
  std::shared_ptr<pagoda::Engine> engine_;
};

// A chat reply's shape, held opaque by Python between prepare_chat and split_reply.
struct ReplyShapeHandle {
  pagoda::chat::ReplyShape shape;
};

// The data spans as offsets into the Python str of the prompt (code points, not bytes).
py::list code_point_spans(const pagoda::ChatPrompt& prompt) {
  py::list out;
  size_t byte = 0, code_points = 0;
  auto advance_to = [&](size_t offset) {
    for (; byte < offset && byte < prompt.text.size(); ++byte) {
      if ((static_cast<unsigned char>(prompt.text[byte]) & 0xC0) != 0x80) ++code_points;
    }
    return code_points;
  };
  for (const pagoda::TextSpan& s : prompt.data_spans) {
    const size_t begin = advance_to(s.begin);
    out.append(py::make_tuple(begin, advance_to(s.end)));
  }
  return out;
}

pagoda::KvCacheType kv_cache_type(const std::string& name) {
  if (auto t = pagoda::parse_kv_cache_type(name)) return *t;
  throw pagoda::Error("kv_cache_type must be f32, f16, bf16 or q8_0, got '" + name + "'");
}

pagoda::PreemptionMode preemption_mode(const std::string& name) {
  if (name == "recompute") return pagoda::PreemptionMode::Recompute;
  if (name == "swap") return pagoda::PreemptionMode::Swap;
  throw pagoda::Error("preemption must be 'recompute' or 'swap', got '" + name + "'");
}

pagoda::Pooling pooling_of(const std::string& name) {
  for (pagoda::Pooling p : {pagoda::Pooling::Model, pagoda::Pooling::Mean, pagoda::Pooling::Cls, pagoda::Pooling::Last,
                            pagoda::Pooling::Rank, pagoda::Pooling::None}) {
    if (name == pagoda::pooling_name(p)) return p;
  }
  throw pagoda::Error("pooling must be 'model', 'mean', 'cls', 'last', 'rank' or 'none', got '" + name + "'");
}

// A (rows, cols) float32 numpy array holding a copy of `values` (rows * cols of them).
py::array_t<float> float_matrix(const std::vector<float>& values, int64_t rows, int64_t cols) {
  py::array_t<float> out({rows, cols});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "pagoda's C++ engine; use the pagoda package, not this module.";
  py::register_exception<pagoda::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<pagoda::SamplingParams>(m, "SamplingParams")
      .def(py::init([](float temperature, int32_t top_k, float top_p, float min_p, float repetition_penalty,
                       int32_t repetition_window, float presence_penalty, float frequency_penalty,
                       std::vector<std::pair<int32_t, float>> logit_bias, int32_t min_tokens, uint64_t seed) {
             pagoda::SamplingParams p{.temperature = temperature,
                                      .top_k = top_k,
                                      .top_p = top_p,
                                      .min_p = min_p,
                                      .repetition_penalty = repetition_penalty,
                                      .repetition_window = repetition_window,
                                      .presence_penalty = presence_penalty,
                                      .frequency_penalty = frequency_penalty,
                                      .logit_bias = std::move(logit_bias),
                                      .min_tokens = min_tokens,
                                      .seed = seed};
             p.validate();
             return p;
           }),
           py::kw_only(), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("min_p"),
           py::arg("repetition_penalty"), py::arg("repetition_window"), py::arg("presence_penalty"),
           py::arg("frequency_penalty"), py::arg("logit_bias"), py::arg("min_tokens"), py::arg("seed"));

  py::class_<pagoda::TokenLogprob>(m, "TokenLogprob", "A token and its log-probability.")
      .def_readonly("token", &pagoda::TokenLogprob::token)
      .def_readonly("logprob", &pagoda::TokenLogprob::logprob)
      .def("__repr__",
           [](const pagoda::TokenLogprob& t) { return py::str("TokenLogprob({}, {})").format(t.token, t.logprob); });

  py::class_<pagoda::TokenLogprobs>(m, "TokenLogprobs",
                                    "A token's log-probability (of the raw logits) and its step's most likely tokens.")
      .def_readonly("logprob", &pagoda::TokenLogprobs::logprob)
      .def_readonly("top", &pagoda::TokenLogprobs::top, "most likely first");

  py::class_<pagoda::StreamEvent>(m, "Delta", "A piece of a streamed request's output.")
      .def_readonly("token", &pagoda::StreamEvent::token,
                    "the token id, or -1 when the piece only releases held-back text")
      .def_property_readonly(
          "text", [](const pagoda::StreamEvent& e) { return utf8(e.text); },
          "the text it completes: whole UTF-8 characters, possibly empty")
      .def_readonly("logprobs", &pagoda::StreamEvent::logprobs, "with SamplingParams.logprobs >= 0, for a token")
      .def("__repr__", [](const pagoda::StreamEvent& e) {
        return py::str("Delta(token={}, text={!r})").format(e.token, utf8(e.text));
      });

  py::class_<pagoda::Completion>(m, "Completion", "A finished request.")
      .def_readonly("token_ids", &pagoda::Completion::token_ids)
      .def_property_readonly("text", [](const pagoda::Completion& c) { return utf8(c.text); })
      .def_readonly("logprobs", &pagoda::Completion::logprobs)
      .def_readonly("prompt_logprobs", &pagoda::Completion::prompt_logprobs)
      .def_property_readonly("finish_reason",
                             [](const pagoda::Completion& c) { return pagoda::finish_reason_name(c.finish_reason); })
      .def_readonly("prompt_tokens", &pagoda::Completion::prompt_tokens)
      .def_readonly("time_to_first_token_s", &pagoda::Completion::time_to_first_token_s)
      .def_readonly("time_per_output_token_s", &pagoda::Completion::time_per_output_token_s)
      .def_readonly("preemptions", &pagoda::Completion::preemptions)
      .def("__repr__", [](const pagoda::Completion& c) {
        return py::str("Completion(text={!r}, finish_reason={!r}, tokens={})")
            .format(utf8(c.text), pagoda::finish_reason_name(c.finish_reason), c.token_ids.size());
      });

  py::class_<pagoda::EngineMetrics>(m, "Metrics", "A snapshot of the engine's counters.")
      .def_readonly("queued", &pagoda::EngineMetrics::queued)
      .def_readonly("running", &pagoda::EngineMetrics::running)
      .def_readonly("preempted", &pagoda::EngineMetrics::preempted)
      .def_readonly("finished", &pagoda::EngineMetrics::finished)
      .def_readonly("kv_pages_used", &pagoda::EngineMetrics::kv_pages_used)
      .def_readonly("kv_pages_cached", &pagoda::EngineMetrics::kv_pages_cached)
      .def_readonly("kv_pages_free", &pagoda::EngineMetrics::kv_pages_free)
      .def_readonly("kv_pages_total", &pagoda::EngineMetrics::kv_pages_total)
      .def_readonly("prefix_hit_tokens", &pagoda::EngineMetrics::prefix_hit_tokens)
      .def_readonly("prefix_queried_tokens", &pagoda::EngineMetrics::prefix_queried_tokens)
      .def_readonly("generated_tokens", &pagoda::EngineMetrics::generated_tokens)
      .def_readonly("tokens_per_second", &pagoda::EngineMetrics::tokens_per_second)
      .def_readonly("adapters_resident", &pagoda::EngineMetrics::adapters_resident)
      .def_readonly("adapter_swaps", &pagoda::EngineMetrics::adapter_swaps)
      .def_readonly("adapter_swap_seconds", &pagoda::EngineMetrics::adapter_swap_seconds)
      .def_readonly("kv_ram_evictions", &pagoda::EngineMetrics::kv_ram_evictions)
      .def_readonly("kv_disk_hit_tokens", &pagoda::EngineMetrics::kv_disk_hit_tokens)
      .def_readonly("kv_disk_pages", &pagoda::EngineMetrics::kv_disk_pages)
      .def_readonly("kv_disk_bytes", &pagoda::EngineMetrics::kv_disk_bytes)
      .def_readonly("kv_disk_read_bytes", &pagoda::EngineMetrics::kv_disk_read_bytes)
      .def_readonly("kv_disk_written_bytes", &pagoda::EngineMetrics::kv_disk_written_bytes)
      .def_readonly("kv_disk_write_backlog", &pagoda::EngineMetrics::kv_disk_write_backlog)
      .def_readonly("kv_disk_writes_skipped", &pagoda::EngineMetrics::kv_disk_writes_skipped)
      .def_readonly("kv_disk_evictions", &pagoda::EngineMetrics::kv_disk_evictions)
      .def_readonly("kv_disk_damaged", &pagoda::EngineMetrics::kv_disk_damaged)
      .def("__repr__", [](const pagoda::EngineMetrics& m) {
        return py::str(
                   "Metrics(queued={}, running={}, finished={}, generated_tokens={}, tokens_per_second={:.1f}, "
                   "kv_pages_used={}, kv_pages_cached={}, kv_pages_total={})")
            .format(m.queued, m.running, m.finished, m.generated_tokens, m.tokens_per_second, m.kv_pages_used,
                    m.kv_pages_cached, m.kv_pages_total);
      });

  py::class_<Handle>(m, "Handle")
      .def_property_readonly("id", &Handle::id)
      .def("cancel", &Handle::cancel)
      .def("done", &Handle::done)
      .def("result", &Handle::result, py::arg("timeout") = py::none())
      .def("next_delta", &Handle::next_delta)
      .def("forward_to", &Handle::forward_to, py::arg("loop"), py::arg("sink"));

  py::class_<PyEngine>(m, "Engine")
      .def(py::init([](std::string model, std::string tokenizer, std::string mmproj, bool use_mmap, int threads,
                       int32_t kv_pages, size_t kv_bytes, int32_t tokens_per_page,
                       const std::string& kv_cache_type_name, int32_t max_tokens_per_step, int32_t max_entries_per_step,
                       int32_t max_running, int32_t prefill_chunk, const std::string& preemption,
                       int32_t max_resident_adapters, int32_t adapter_run_cap, bool mixed_adapter_batches,
                       bool prefix_caching, bool kv_prefault, std::string kv_disk, size_t kv_disk_size,
                       std::string kv_events, std::string kv_events_replay, std::string kv_events_topic) {
             pagoda::EngineConfig c{.model_path = std::move(model),
                                    .tokenizer_path = std::move(tokenizer),
                                    .mmproj_path = std::move(mmproj),
                                    .use_mmap = use_mmap,
                                    .threads = threads,
                                    .kv_pages = kv_pages,
                                    .kv_bytes = kv_bytes,
                                    .tokens_per_page = tokens_per_page,
                                    .kv_cache_type = kv_cache_type(kv_cache_type_name),
                                    .max_tokens_per_step = max_tokens_per_step,
                                    .max_entries_per_step = max_entries_per_step,
                                    .max_running = max_running,
                                    .prefill_chunk = prefill_chunk,
                                    .preemption = preemption_mode(preemption),
                                    .max_resident_adapters = max_resident_adapters,
                                    .adapter_run_cap = adapter_run_cap,
                                    .mixed_adapter_batches = mixed_adapter_batches,
                                    .prefix_caching = prefix_caching,
                                    .kv_prefault = kv_prefault,
                                    .kv_disk_path = std::move(kv_disk),
                                    .kv_disk_bytes = kv_disk_size,
                                    .kv_events_endpoint = std::move(kv_events),
                                    .kv_events_replay_endpoint = std::move(kv_events_replay),
                                    .kv_events_topic = std::move(kv_events_topic)};
             py::gil_scoped_release release;  // loading reads the whole model
             return std::make_unique<PyEngine>(c);
           }),
           py::kw_only(), py::arg("model"), py::arg("tokenizer"), py::arg("mmproj"), py::arg("use_mmap"),
           py::arg("threads"), py::arg("kv_pages"), py::arg("kv_bytes"), py::arg("tokens_per_page"),
           py::arg("kv_cache_type"), py::arg("max_tokens_per_step"), py::arg("max_entries_per_step"),
           py::arg("max_running"), py::arg("prefill_chunk"), py::arg("preemption"), py::arg("max_resident_adapters"),
           py::arg("adapter_run_cap"), py::arg("mixed_adapter_batches"), py::arg("prefix_caching"),
           py::arg("kv_prefault"), py::arg("kv_disk"), py::arg("kv_disk_size"), py::arg("kv_events"),
           py::arg("kv_events_replay"), py::arg("kv_events_topic"))
      .def("close", &PyEngine::close)
      .def_property_readonly("closed", &PyEngine::closed)
      .def(
          "submit",
          [](PyEngine& self, std::string prompt, std::vector<int32_t> prompt_ids,
             const pagoda::SamplingParams& sampling, int32_t max_tokens, std::vector<std::string> stop,
             std::vector<int32_t> stop_token_ids, bool ignore_eos, int32_t logprobs, int32_t prompt_logprobs,
             std::string adapter, int32_t priority, bool prefix_cache, bool parse_special, bool stream,
             std::optional<py::object> on_token, std::string grammar, std::string json_schema,
             std::vector<std::string> grammar_triggers, std::vector<std::pair<std::string, int32_t>> images,
             std::string image_marker) {
            pagoda::Request r{.prompt = std::move(prompt),
                              .prompt_ids = std::move(prompt_ids),
                              .image_marker = std::move(image_marker),
                              .parse_special = parse_special,
                              .sampling = sampling,
                              .max_new_tokens = max_tokens,
                              .stop_token_ids = std::move(stop_token_ids),
                              .stop_strings = std::move(stop),
                              .logprobs = logprobs,
                              .prompt_logprobs = prompt_logprobs,
                              .grammar = std::move(grammar),
                              .json_schema = std::move(json_schema),
                              .grammar_triggers = std::move(grammar_triggers),
                              .ignore_eos = ignore_eos,
                              .adapter = std::move(adapter),
                              .priority = priority,
                              .stream = stream,
                              .prefix_cache = prefix_cache};
            for (auto& [data, position] : images) r.images.push_back({std::move(data), position});
            return self.submit(std::move(r), std::move(on_token));
          },
          py::kw_only(), py::arg("prompt"), py::arg("prompt_ids"), py::arg("sampling"), py::arg("max_tokens"),
          py::arg("stop"), py::arg("stop_token_ids"), py::arg("ignore_eos"), py::arg("logprobs"),
          py::arg("prompt_logprobs"), py::arg("adapter"), py::arg("priority"), py::arg("prefix_cache"),
          py::arg("parse_special"), py::arg("stream"), py::arg("on_token"), py::arg("grammar") = "",
          py::arg("json_schema") = "", py::arg("grammar_triggers") = std::vector<std::string>{},
          py::arg("images") = std::vector<std::pair<std::string, int32_t>>{},
          py::arg("image_marker") = pagoda::Request{}.image_marker)
      .def(
          "embed",
          // Converted while the GIL is held; embedded (and waited for) without it.
          [](PyEngine& self, const std::vector<std::variant<std::string, std::vector<int32_t>>>& inputs,
             const std::string& pooling, bool normalize) -> py::object {
            std::vector<pagoda::EmbeddingInput> in;
            in.reserve(inputs.size());
            for (const auto& input : inputs) std::visit([&](const auto& v) { in.emplace_back(v); }, input);
            const pagoda::EmbeddingParams params{pooling_of(pooling), normalize};
            bool per_token = false;
            int64_t dim = 0;
            const std::vector<std::vector<float>> vectors = self.call([&](pagoda::Engine& e) {
              std::vector<std::vector<float>> out = e.embed(in, params);
              per_token = params.pooling == pagoda::Pooling::None ||
                          (params.pooling == pagoda::Pooling::Model && e.model_pooling() == pagoda::Pooling::None);
              dim = e.embedding_size();
              return out;
            });
            if (per_token) {  // one (tokens, dim) array per input
              py::list arrays;
              for (const std::vector<float>& v : vectors) arrays.append(float_matrix(v, int64_t(v.size()) / dim, dim));
              return arrays;
            }
            // One (inputs, width) array: width is dim, or 1 for a reranker's scores.
            const auto width = int64_t(vectors.at(0).size());
            py::array_t<float> out({int64_t(vectors.size()), width});
            float* row = out.mutable_data();
            for (const std::vector<float>& v : vectors) {
              if (int64_t(v.size()) != width) throw pagoda::Error("embed: the inputs' vectors differ in length");
              row = std::copy(v.begin(), v.end(), row);
            }
            return out;
          },
          py::arg("inputs"), py::arg("pooling"), py::arg("normalize"))
      .def(
          "rerank",
          // Converted while the GIL is held; scored (and waited for) without it.
          [](PyEngine& self, const std::string& query, const std::vector<std::string>& documents) {
            return self.call([&](pagoda::Engine& e) { return e.rerank(query, documents); });
          },
          py::arg("query"), py::arg("documents"))
      .def(
          "rerank_tokens",
          [](PyEngine& self, const std::string& query, const std::string& document) {
            return self.call([&](pagoda::Engine& e) { return e.rerank_tokens(query, document); });
          },
          py::arg("query"), py::arg("document"))
      .def("takes_images", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.takes_images(); }); })
      .def("embedding_only",
           [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.embedding_only(); }); })
      .def("rerank_probabilities",
           [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.rerank_probabilities(); }); })
      .def("model_pooling",
           [](PyEngine& self) {
             return std::string(pagoda::pooling_name(self.call([](pagoda::Engine& e) { return e.model_pooling(); })));
           })
      .def("embedding_size",
           [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.embedding_size(); }); })
      .def("metrics", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.metrics(); }); })
      .def("model_lost", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.model_lost(); }); })
      .def(
          "load_adapter",
          [](PyEngine& self, const std::string& name, const std::string& path, float scale) {
            self.call([&](pagoda::Engine& e) { e.load_adapter(name, path, scale); });
          },
          py::arg("name"), py::arg("path"), py::arg("scale"))
      .def(
          "unload_adapter",
          [](PyEngine& self, const std::string& name) {
            self.call([&](pagoda::Engine& e) { e.unload_adapter(name); });
          },
          py::arg("name"))
      .def(
          "tokenize",
          [](PyEngine& self, const std::string& text, bool add_bos, bool parse_special) {
            return self.call([&](pagoda::Engine& e) { return e.tokenize(text, add_bos, parse_special); });
          },
          py::arg("text"), py::arg("add_bos"), py::arg("parse_special"))
      .def(
          "detokenize",
          [](PyEngine& self, const std::vector<int32_t>& ids) {
            return utf8(self.call([&](pagoda::Engine& e) { return e.detokenize(ids); }));
          },
          py::arg("ids"))
      .def(
          "token_text",
          [](PyEngine& self, int32_t id) {
            return py::bytes(self.call([&](pagoda::Engine& e) { return e.token_text(id); }));
          },
          py::arg("id"))
      .def("context_length",
           [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.context_length(); }); })
      .def("vocab_size", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.vocab_size(); }); })
      .def("eos_id", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.eos_id(); }); })
      .def("eog_ids", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.eog_ids(); }); })
      .def("add_bos", [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.add_bos(); }); })
      .def("chat_template",
           [](PyEngine& self) { return self.call([](pagoda::Engine& e) { return e.chat_template(); }); })
      .def("special_tokens",
           [](PyEngine& self) {
             py::dict out;
             for (const auto& t : self.call([](pagoda::Engine& e) { return e.special_tokens(); }))
               out[utf8(t.piece)] = t.id;
             return out;
           })
      .def("chat_format",
           [](PyEngine& self) {
             const pagoda::ChatFormat f = self.call([](pagoda::Engine& e) { return e.chat_format(); });
             return py::make_tuple(f.family, f.stop_token_ids, f.stop_strings);
           })
      .def(
          "prepare_chat",
          [](PyEngine& self, const std::string& body, bool add_generation_prompt, bool constrain,
             bool special_in_content, const std::string& image_marker) {
            const pagoda::python::PreparedChat p = self.call([&](pagoda::Engine& e) {
              return pagoda::python::prepare_chat(e, body, add_generation_prompt, constrain, special_in_content,
                                                  image_marker);
            });
            std::optional<ReplyShapeHandle> shape;
            if (p.shape) shape = ReplyShapeHandle{*p.shape};
            py::list images;  // (bytes, position): an image file's bytes are not text
            for (const pagoda::RequestImage& image : p.images)
              images.append(py::make_tuple(py::bytes(image.data), image.position));
            return py::make_tuple(utf8(p.prompt.text), code_point_spans(p.prompt), p.prompt_ids, images, p.grammar,
                                  p.triggers, shape);
          },
          py::arg("body"), py::arg("add_generation_prompt"), py::arg("constrain"), py::arg("special_in_content"),
          py::arg("image_marker") = "");

  py::class_<ReplyShapeHandle>(m, "ReplyShape", "What a chat reply may hold besides text (thinking, tool calls).");
  m.def("check_json_depth", &check_json_depth, py::arg("value"), py::arg("what"),
        "Raises pagoda.Error when dicts/lists/tuples in value nest deeper than the engine's JSON bound (128).");
  m.def(
      "split_reply",
      [](const ReplyShapeHandle& shape, const std::string& reply) {
        pagoda::chat::ChatReplySplitter splitter(shape.shape);
        pagoda::chat::ChatReplySplitter::Delta d = splitter.feed(reply);
        const pagoda::chat::ChatReplySplitter::Delta rest = splitter.finish();
        py::list calls;
        for (const pagoda::chat::ParsedToolCall& c : splitter.calls())
          calls.append(py::make_tuple(c.id, c.name, c.arguments));
        return py::make_tuple(utf8(d.content + rest.content), utf8(d.reasoning + rest.reasoning), calls);
      },
      py::arg("shape"), py::arg("reply"));
}
