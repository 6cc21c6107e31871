// The Engine facade: loads the model, wires the four actors, validates and submits requests,
// and shuts everything down so that every future resolves and every page comes back.

#include "pagoda/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "engine/chat/chat_renderer.h"
#include "engine/chat/chat_template.h"
#include "engine/chat/rerank_prompt.h"
#include "engine/engine_cores.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/token_mask_cache.h"
#include "engine/lora/lora_adapter.h"
#include "engine/model/model.h"
#include "engine/sampling/logprobs.h"
#include "engine/image_prompt.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

void validate_config(const EngineConfig& c) {
  auto fail = [](const std::string& what) { throw Error("bad engine config: " + what); };
  if (c.threads < 0) fail("threads must be >= 0");
  if (c.kv_pages < 0) fail("kv_pages must be >= 0");
  if (c.tokens_per_page <= 0) fail("tokens_per_page must be positive");
  if (c.max_tokens_per_step <= 0) fail("max_tokens_per_step must be positive");
  if (c.max_entries_per_step <= 0) fail("max_entries_per_step must be positive");
  if (c.max_running <= 0) fail("max_running must be positive");
  if (c.prefill_chunk <= 0) fail("prefill_chunk must be positive");
  if (c.max_resident_adapters <= 0) fail("max_resident_adapters must be positive");
  if (c.adapter_run_cap <= 0) fail("adapter_run_cap must be positive");
  if (c.speculative_max_batch < 0) fail("speculative_max_batch must be >= 0");
  c.speculative.validate();
  if (c.draft_kv_pages < 0) fail("draft_kv_pages must be >= 0");
  if (c.speculative.mode == SpeculativeMode::Draft && c.draft_model_path.empty()) {
    fail("speculative mode draft needs a draft model (draft_model_path, --model-draft)");
  }
}

std::vector<Engine::SpecialToken> special_pieces(const TokenizerVocab& v) {
  std::vector<Engine::SpecialToken> out;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.types[id] == TokenType::Control || v.types[id] == TokenType::UserDefined)
      out.push_back({v.tokens[id], int32_t(id)});
  }
  return out;
}

// The family of the model's template; Plain when it has none or one no family matches.
chat::Template chat_template_of(const std::optional<std::string>& jinja, const Tokenizer& tokenizer) {
  if (!jinja) return {};
  const int32_t eos = tokenizer.eos_id();
  const auto& tokens = tokenizer.vocab().tokens;
  const std::string eos_text = eos >= 0 && size_t(eos) < tokens.size() ? tokens[size_t(eos)] : std::string();
  return chat::detect_template(*jinja, eos_text).value_or(chat::Template{});
}

// The template parsed for rendering; null without one, or (with a warning naming the line) when
// pagoda cannot parse it, in which case its family's built-in layout is used.
std::shared_ptr<const jinja::Template> parse_chat_template(const std::optional<std::string>& jinja) {
  if (!jinja) return nullptr;
  try {
    return std::make_shared<const jinja::Template>(*jinja);
  } catch (const Error& e) {
    std::fprintf(stderr,
                 "pagoda: warning: the chat template does not parse (%s); using the built-in layout of its family\n",
                 e.what());
    return nullptr;
  }
}

std::string token_spelling(const Tokenizer& tokenizer, int32_t id) {
  const auto& tokens = tokenizer.vocab().tokens;
  return id >= 0 && size_t(id) < tokens.size() ? tokens[size_t(id)] : std::string();
}

// How many tokens a decoder reranker's prompt has after its last {document}; 0 without one.
size_t rerank_tail_of(const Model& model) {
  if (!model.rerank_template) return 0;
  const std::string_view tmpl = *model.rerank_template, placeholder = "{document}";
  const size_t at = tmpl.rfind(placeholder);
  if (at == std::string_view::npos) return 0;
  return model.tokenizer.encode(tmpl.substr(at + placeholder.size()), false, true).size();
}

}  // namespace

struct Engine::Impl {
  explicit Impl(const EngineConfig& c)
      : config(c),
        model(load_model(c.model_path, c.tokenizer_path, c.use_mmap ? MappedFile::Load::Map : MappedFile::Load::Copy)),
        chat_template(c.chat_template.empty() ? model.chat_template : std::optional<std::string>(c.chat_template)),
        chat_format(chat_template_of(chat_template, model.tokenizer)),
        jinja_template(parse_chat_template(chat_template)),
        specials(special_pieces(model.tokenizer.vocab())),
        layout(KvLayout::for_model(model.config, c.tokens_per_page, c.kv_cache_type)),
        rerank_tail(rerank_tail_of(model)),
        vision(load_vision(c, model)),
        image_tokens(vision ? pagoda::image_tokens(vision->config, model.tokenizer) : ImageTokens{}) {
    if (model.config.is_encoder()) encoder = std::make_unique<EncoderCore>(c, model, metrics);
    else decoder = std::make_unique<DecoderCore>(c, model, vision.get(), metrics);
  }

  std::vector<int32_t> validated_prompt(const Request& r) const;
  // What encoding an image of this size costs a step, in the language model's tokens.
  int32_t image_cost_tokens(const PixelPlanes& pixels) const;
  // What `pooling` means on this model: Pooling::Model resolved from its GGUF pooling_type.
  // Throws pagoda::Error ("bad request: ...") for a model pooling pagoda cannot give.
  Pooling embedding_pooling(Pooling pooling) const;
  // The request's grammar, compiled; null without one. Throws pagoda::Error for a bad one.
  std::unique_ptr<grammar::GrammarConstraint> constraint_of(const Request& r) const;
  // The masks of recent grammars over the vocabulary, made for the first constrained request.
  grammar::TokenMaskCache& grammar_masks() const;

  EngineConfig config;
  Model model;
  std::optional<std::string> chat_template;
  chat::Template chat_format;
  std::shared_ptr<const jinja::Template> jinja_template;
  std::vector<SpecialToken> specials;
  KvLayout layout;  // of the KV cache a decoder keeps (a Sequence's block table counts in it)
  // The tokens of a decoder reranker's prompt after {document} (0 without a rerank prompt),
  // which a truncated pair keeps at its end: the turn's end and the assistant's opening.
  size_t rerank_tail;
  std::unique_ptr<VisionModel> vision;  // EngineConfig::mmproj_path's projector, or null
  ImageTokens image_tokens;             // its family's, in the model's vocabulary
  MetricsBoard metrics;
  // One of the two, by the model's kind.
  std::unique_ptr<DecoderCore> decoder;
  std::unique_ptr<EncoderCore> encoder;

  mutable std::once_flag masks_made;
  mutable std::unique_ptr<grammar::TokenMaskCache> masks;

  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> accepting{true};
  std::atomic<int32_t> submitting{0};
  std::atomic<bool> shut_down{false};
};

}  // namespace pagoda

namespace pagoda {

std::vector<int32_t> Engine::Impl::validated_prompt(const Request& r) const {
  auto refuse = [](const std::string& what) { throw Error("bad request: " + what); };
  std::vector<int32_t> ids = r.prompt_ids;
  if (ids.empty()) {
    if (r.prompt.empty()) refuse("the prompt is empty");
    ids = model.tokenizer.encode(r.prompt, model.tokenizer.add_bos(), r.parse_special);
    // An embedding input ends with EOS when the vocabulary says so (tokenizer.ggml.add_eos_token:
    // Qwen3-Embedding pools the last position, which must be its EOS), as llama.cpp adds it.
    const int32_t eos = model.tokenizer.eos_id();
    if (r.embedding && model.tokenizer.add_eos() && eos >= 0 && (ids.empty() || ids.back() != eos)) ids.push_back(eos);
  }
  const int32_t vocab = model.config.vocab_size;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab)
      refuse("prompt token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(vocab - 1) +
             ")");
  }
  for (int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= vocab) refuse("stop token id " + std::to_string(id) + " is outside the vocabulary");
  }
  for (const auto& [id, bias] : r.sampling.logit_bias) {
    if (id >= vocab) refuse("logit_bias token id " + std::to_string(id) + " is outside the vocabulary");
  }
  for (const auto& [name, k] : {std::pair{"logprobs", r.logprobs}, std::pair{"prompt_logprobs", r.prompt_logprobs}}) {
    if (k < -1 || k > kMaxTopLogprobs) {
      refuse(std::string(name) + " must be -1 (none), 0 or up to " + std::to_string(kMaxTopLogprobs) + ", got " +
             std::to_string(k));
    }
  }
  if (r.embedding) {
    // A prefill only: nothing is generated, so only the prompt must fit.
    if (r.logprobs >= 0 || r.prompt_logprobs >= 0) refuse("an embedding request has no logprobs or prompt_logprobs");
    if (!r.grammar.empty() || !r.json_schema.empty()) refuse("an embedding request has no grammar or json_schema");
    // Throws for a model pooling pagoda cannot give. A reranker's score is asked for by name
    // (rerank() does): its model pooling gives no vector to embed.
    if (r.embedding->pooling == Pooling::Model && embedding_pooling(Pooling::Model) == Pooling::Rank) {
      refuse("the model is a reranker: it scores query-document pairs (rerank), it does not embed");
    }
    embedding_pooling(r.embedding->pooling);
  } else {
    if (model.config.is_encoder()) {
      refuse(std::string("the model is an embedding model (") + architecture_name(model.config.arch) +
             "): it computes embeddings and scores, not text");
    }
    const int32_t least = r.prompt_logprobs >= 0 ? 0 : 1;  // scoring a prompt may generate nothing
    if (r.max_new_tokens < least) {
      refuse("max_new_tokens must be at least " + std::to_string(least) + ", got " + std::to_string(r.max_new_tokens));
    }
  }
  const size_t context = size_t(model.config.context_length);
  if (r.embedding && r.embedding->truncate && ids.size() > context) {
    // Kept at the end: a decoder reranker's prompt after the document, whose last position is
    // scored, or else a closing control token ([SEP], an appended EOS).
    const bool control_last = model.tokenizer.vocab().types[size_t(ids.back())] == TokenType::Control;
    const size_t tail = r.embedding->pooling == Pooling::Rank && rerank_tail > 0 ? rerank_tail : size_t(control_last);
    const auto keep = ptrdiff_t(std::min(tail, context / 2));
    ids.erase(ids.begin() + (ptrdiff_t(context) - keep), ids.end() - keep);
  }
  const int32_t new_tokens = r.embedding ? 0 : r.max_new_tokens;
  const int64_t total = int64_t(ids.size()) + new_tokens;
  if (r.embedding && total > model.config.context_length) {
    refuse("the input has " + std::to_string(ids.size()) + " tokens, more than the context length " +
           std::to_string(model.config.context_length));
  } else if (total > model.config.context_length) {
    refuse("prompt (" + std::to_string(ids.size()) + " tokens) + max_new_tokens (" + std::to_string(r.max_new_tokens) +
           ") exceeds the context length " + std::to_string(model.config.context_length));
  }
  // Sliding-window groups hold only their window's pages at a time (kv_layout.h).
  if (decoder) {
    const PagePool& pool = decoder->pool;
    const int64_t pages = pool.layout().peak_pages(total, max_step_positions(config, vision.get()));
    if (pages > pool.capacity()) {
      refuse(std::string(r.embedding ? "the input" : "prompt + max_new_tokens") + " needs " + std::to_string(pages) +
             " KV pages but the whole cache has " + std::to_string(pool.capacity()) + "; it could never run");
    }
  } else if (!r.adapter.empty()) {
    refuse("unknown adapter '" + r.adapter + "': an encoder model takes no LoRA adapters");
  }
  r.sampling.validate();
  if (r.speculative) {
    r.speculative->validate();
    if (r.speculative->mode == SpeculativeMode::Draft && !(decoder && decoder->draft)) {
      refuse("speculative mode draft needs a draft model, and the engine has none (draft_model_path, --model-draft)");
    }
  }
  if (!r.grammar.empty() && !r.json_schema.empty()) refuse("give a grammar or a json_schema, not both");
  if (r.grammar.empty() && r.json_schema.empty() && !r.grammar_triggers.empty()) {
    refuse("grammar_triggers need a grammar or a json_schema");
  }
  for (const std::string& t : r.grammar_triggers) {
    if (t.empty()) refuse("a grammar trigger is empty");
  }
  return ids;
}

int32_t Engine::Impl::image_cost_tokens(const PixelPlanes& pixels) const {
  const std::vector<int32_t> one = {0};
  Batch token;
  token.entries.push_back({one, 0, nullptr});
  const double per_token = decoder->runner.flops(token);
  const double encoding = decoder->vision->flops(pixels.width, pixels.height);
  return int32_t(std::min(std::ceil(encoding / per_token), 1e9));
}

Pooling Engine::Impl::embedding_pooling(Pooling pooling) const {
  const EncoderWeights& e = model.weights.encoder;
  const bool rank_head = !e.cls.empty() || !e.cls_output.empty() || !model.weights.rank_output.empty();
  if (pooling == Pooling::Rank && !rank_head) {
    throw Error("bad request: rank pooling needs a reranker's rank head (cls), which the model has not");
  }
  if (pooling != Pooling::Model) return pooling;
  const int32_t type = model.config.pooling_type;
  switch (type) {
    case -1:  // not stated: a generation model, whose last position has read the whole input
    case 3: return Pooling::Last;
    case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 0: return Pooling::None;
    case 4:
      if (!rank_head) {
        throw Error(
            "bad request: the model's pooling_type is rank (a reranker's score), but it has no rank head "
            "(cls)");
      }
      return Pooling::Rank;
    default: throw Error("bad request: the model's pooling_type " + std::to_string(type) + " is unknown");
  }
}

std::unique_ptr<grammar::GrammarConstraint> Engine::Impl::constraint_of(const Request& r) const {
  if (r.grammar.empty() && r.json_schema.empty()) return nullptr;
  std::shared_ptr<const grammar::TokenMask> mask;
  try {
    mask = grammar_masks().get(r.json_schema.empty() ? r.grammar : grammar::json_schema_to_gbnf(r.json_schema));
  } catch (const Error& e) {
    throw Error(std::string("bad request: ") + e.what());  // the parser's or schema compiler's message names it
  }
  std::vector<int32_t> ending = r.stop_token_ids;
  if (!r.ignore_eos) ending.insert(ending.end(), model.tokenizer.eog_ids().begin(), model.tokenizer.eog_ids().end());
  std::shared_ptr<const grammar::Grammar> g = mask->grammar();
  return std::make_unique<grammar::GrammarConstraint>(std::move(g), std::move(mask), model.tokenizer, std::move(ending),
                                                      r.grammar_triggers);
}

grammar::TokenMaskCache& Engine::Impl::grammar_masks() const {
  std::call_once(masks_made, [&] {
    const Tokenizer& t = model.tokenizer;
    std::vector<std::string> texts(size_t(t.vocab_size()));
    std::vector<int32_t> excluded = t.eog_ids();
    for (int32_t id = 0; id < t.vocab_size(); ++id) {
      texts[size_t(id)] = t.token_text(id);
      // Control tokens are not text a grammar could match.
      const TokenType type = t.vocab().types[size_t(id)];
      if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::Unused) excluded.push_back(id);
    }
    masks = std::make_unique<grammar::TokenMaskCache>(std::make_shared<const grammar::TokenTrie>(texts, excluded));
  });
  return *masks;
}

Engine::Engine(const EngineConfig& config) {
  validate_config(config);
  impl_ = std::make_unique<Impl>(config);
}

Engine::~Engine() { shutdown(); }

RequestHandle Engine::submit(Request request) {
  Impl& m = *impl_;
  // Counted so shutdown can wait for submits already past the `accepting` check.
  m.submitting.fetch_add(1);
  struct Leave {
    std::atomic<int32_t>& n;
    ~Leave() { n.fetch_sub(1); }
  } leave{m.submitting};
  if (!m.accepting.load()) throw Error("the engine is shut down");
  std::vector<SequenceImage> images;
  if (!request.images.empty()) {
    auto refuse = [](const std::string& what) { throw Error("bad request: " + what); };
    if (!m.vision) refuse("the model takes no images: it was loaded without a vision projector (mmproj)");
    if (request.embedding) refuse("an embedding request cannot hold images");
    if (request.prompt_logprobs >= 0) refuse("a prompt with images has no prompt_logprobs");
    ImagePrompt laid_out = lay_out_images(request, *m.vision, m.image_tokens, m.model.tokenizer);
    request.prompt_ids = std::move(laid_out.tokens);
    request.prompt.clear();
    images = std::move(laid_out.images);
    for (SequenceImage& image : images) image.cost_tokens = m.image_cost_tokens(*image.pixels);
  }
  std::vector<int32_t> prompt = m.validated_prompt(request);
  std::unique_ptr<grammar::GrammarConstraint> constraint = m.constraint_of(request);

  auto state = std::make_shared<detail::RequestState>();
  state->id = m.next_id.fetch_add(1, std::memory_order_relaxed);
  state->streaming = request.stream;
  if (m.decoder) {
    state->notify_cancel = [prefill = std::weak_ptr(m.decoder->prefill_mailbox),
                            decode = std::weak_ptr(m.decoder->decode_mailbox)] {
      if (auto p = prefill.lock()) p->post(Wake{});
      if (auto d = decode.lock()) d->post(Wake{});
    };
  } else {
    state->notify_cancel = [encoder = std::weak_ptr(m.encoder->scheduler.mailbox())] {
      if (auto e = encoder.lock()) e->post(Wake{});
    };
  }
  std::future<Completion> future = state->promise.get_future();
  if (!request.speculative) request.speculative = m.config.speculative;
  auto seq = std::make_unique<Sequence>(state, request, std::move(prompt), m.model.tokenizer, m.layout);
  seq->prefix_cache = seq->prefix_cache && m.config.prefix_caching;
  seq->images = std::move(images);
  seq->grammar = std::move(constraint);
  if (request.embedding) {
    const Pooling pooling = m.embedding_pooling(request.embedding->pooling);
    // An encoder's rank head reads [CLS]; a decoder's, the last position, which read the pair.
    const auto rank_row =
        m.model.config.is_encoder() ? EmbeddingPooler::RankRow::First : EmbeddingPooler::RankRow::Last;
    seq->embedding.emplace(pooling, request.embedding->normalize, seq->prompt_len, m.model.config.dim, rank_row);
    // Mean, cls and an encoder's rank need rows of positions a cache hit would skip.
    if (pooling != Pooling::Last && !(pooling == Pooling::Rank && rank_row == EmbeddingPooler::RankRow::Last))
      seq->prefix_cache = false;
  }
  if (auto lost = weights_lost(m.model)) {
    // The model is gone for good: fail at once instead of queuing for a step that would fail.
    m.metrics.finished.fetch_add(1, std::memory_order_relaxed);
    seq->finish(FinishReason::Error, *lost);
    return RequestHandle(std::move(state), std::move(future));
  }
  m.metrics.queued.fetch_add(1, std::memory_order_relaxed);
  if (m.decoder) m.decoder->router.post(NewRequest{std::move(seq)});
  else m.encoder->scheduler.post(NewRequest{std::move(seq)});
  return RequestHandle(std::move(state), std::move(future));
}

std::vector<std::vector<float>> Engine::embed(const std::vector<EmbeddingInput>& inputs,
                                              const EmbeddingParams& params) {
  if (inputs.empty()) throw Error("bad request: nothing to embed (no inputs)");
  // Every input is checked before any is queued, so a bad one costs nothing.
  std::vector<Request> requests(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Request& r = requests[i];
    r.embedding = params;
    if (inputs[i].ids.empty()) r.prompt = inputs[i].text;
    else r.prompt_ids = inputs[i].ids;
    try {
      r.prompt_ids = impl_->validated_prompt(r);
    } catch (const Error& e) {
      const std::string what = e.what(), prefix = "bad request: ";
      throw Error(prefix + "input " + std::to_string(i) + ": " +
                  (what.starts_with(prefix) ? what.substr(prefix.size()) : what));
    }
    r.prompt.clear();
  }
  std::vector<RequestHandle> handles;
  handles.reserve(requests.size());
  auto cancel_all = [&] {
    for (RequestHandle& h : handles) h.cancel();
    for (RequestHandle& h : handles) {
      if (h.future().valid()) h.future().wait();
    }
  };
  try {
    for (Request& r : requests) handles.push_back(submit(std::move(r)));
  } catch (...) {  // shut down meanwhile: nothing already queued is left running
    cancel_all();
    throw;
  }
  std::vector<std::vector<float>> out(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    Completion c = handles[i].get();
    if (c.finish_reason != FinishReason::Length || c.embedding.empty()) {
      cancel_all();
      throw Error("input " + std::to_string(i) + " was not embedded: " +
                  (c.error.empty() ? std::string(finish_reason_name(c.finish_reason)) : c.error));
    }
    out[i] = std::move(c.embedding);
  }
  return out;
}

std::vector<int32_t> Engine::rerank_tokens(const std::string& query, const std::string& document) const {
  const Tokenizer& t = impl_->model.tokenizer;
  if (const auto& tmpl = impl_->model.rerank_template) {
    // A decoder reranker's own prompt, without BOS or EOS (llama-server tokenizes it without
    // special tokens added); the query and the document are plain text in it.
    const ChatPrompt prompt = render_rerank_prompt(*tmpl, query, document);
    return t.encode(prompt.text, false, prompt.data_spans);
  }
  const int32_t bos = t.bos_id(), eos = t.eos_id(), sep = t.sep_id();
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (id >= 0) ids.push_back(id);
  };
  auto add_text = [&](const std::string& text) {
    const std::vector<int32_t> piece = t.encode(text, false, false);
    ids.insert(ids.end(), piece.begin(), piece.end());
  };
  add(bos);
  add_text(query);
  add(eos);
  if (sep != eos) add(sep);
  add_text(document);
  add(eos);
  return ids;
}

std::vector<float> Engine::rerank(const std::string& query, const std::vector<std::string>& documents) {
  if (documents.empty()) throw Error("bad request: nothing to rerank (no documents)");
  if (impl_->embedding_pooling(Pooling::Model) != Pooling::Rank) {
    throw Error("bad request: the model is not a reranker (its pooling is not rank)");
  }
  std::vector<EmbeddingInput> pairs;
  pairs.reserve(documents.size());
  for (const std::string& d : documents) pairs.emplace_back(rerank_tokens(query, d));
  std::vector<std::vector<float>> scores = embed(pairs, {Pooling::Rank, false});
  std::vector<float> out;
  out.reserve(scores.size());
  for (const std::vector<float>& s : scores) out.push_back(s.at(0));
  return out;
}

bool Engine::rerank_probabilities() const {
  const WeightTensor& head = impl_->model.weights.rank_output;
  return !head.empty() && head.rows >= 2;
}

bool Engine::embedding_only() const { return impl_->model.config.is_encoder(); }

Pooling Engine::model_pooling() const {
  try {
    return impl_->embedding_pooling(Pooling::Model);
  } catch (const Error& e) {
    throw Error(std::string(e.what()).substr(std::string("bad request: ").size()));
  }
}

int32_t Engine::embedding_size() const { return impl_->model.config.dim; }

bool Engine::takes_images() const { return impl_->vision != nullptr; }

EngineMetrics Engine::metrics() const {
  const MetricsBoard& b = impl_->metrics;
  EngineMetrics e;
  e.queued = b.queued.load(std::memory_order_relaxed);
  e.running = b.running.load(std::memory_order_relaxed);
  e.preempted = b.preempted.load(std::memory_order_relaxed);
  e.finished = b.finished.load(std::memory_order_relaxed);
  e.kv_pages_total = b.pages_total.load(std::memory_order_relaxed);
  e.kv_pages_used = b.pages_used.load(std::memory_order_relaxed);
  e.kv_pages_cached = b.pages_cached.load(std::memory_order_relaxed);
  e.kv_pages_free = e.kv_pages_total - e.kv_pages_used - e.kv_pages_cached;
  e.prefix_hit_tokens = b.prefix_hit_tokens.load(std::memory_order_relaxed);
  e.prefix_queried_tokens = b.prefix_queried_tokens.load(std::memory_order_relaxed);
  e.generated_tokens = b.generated_tokens.load(std::memory_order_relaxed);
  const double busy_s = double(b.busy_ns.load(std::memory_order_relaxed)) * 1e-9;
  e.tokens_per_second = busy_s > 0.0 ? double(e.generated_tokens) / busy_s : 0.0;
  e.adapters_resident = b.adapters_resident.load(std::memory_order_relaxed);
  e.adapter_swaps = b.adapter_swaps.load(std::memory_order_relaxed);
  e.adapter_swap_seconds = double(b.adapter_swap_ns.load(std::memory_order_relaxed)) * 1e-9;
  e.speculative_proposed = b.speculative_proposed.load(std::memory_order_relaxed);
  e.speculative_accepted = b.speculative_accepted.load(std::memory_order_relaxed);
  e.speculative_acceptance =
      e.speculative_proposed > 0 ? double(e.speculative_accepted) / double(e.speculative_proposed) : 0.0;
  e.draft_kv_pages_used = b.draft_pages_used.load(std::memory_order_relaxed);
  e.draft_kv_pages_total = b.draft_pages_total.load(std::memory_order_relaxed);
  e.kv_ram_evictions = b.ram_evictions.load(std::memory_order_relaxed);
  e.kv_disk_hit_tokens = b.disk_hit_tokens.load(std::memory_order_relaxed);
  e.kv_disk_pages = b.disk_pages.load(std::memory_order_relaxed);
  e.kv_disk_bytes = b.disk_bytes.load(std::memory_order_relaxed);
  e.kv_disk_read_bytes = b.disk_read_bytes.load(std::memory_order_relaxed);
  e.kv_disk_written_bytes = b.disk_written_bytes.load(std::memory_order_relaxed);
  e.kv_disk_write_backlog = b.disk_write_backlog.load(std::memory_order_relaxed);
  e.kv_disk_writes_skipped = b.disk_writes_skipped.load(std::memory_order_relaxed);
  e.kv_disk_evictions = b.disk_evictions.load(std::memory_order_relaxed);
  e.kv_disk_damaged = b.disk_damaged.load(std::memory_order_relaxed);
  return e;
}

std::optional<std::string> Engine::model_lost() const { return weights_lost(impl_->model); }

void Engine::load_adapter(const std::string& name, const std::string& path, float scale) {
  if (name.empty()) throw Error("a LoRA adapter needs a name");
  if (!impl_->decoder) throw Error("an encoder model takes no LoRA adapters");
  // Parsed and checked on the caller's thread: a bad file never reaches the actors.
  auto adapter = std::make_shared<const LoraAdapter>(load_lora_adapter(path, impl_->model.config, scale));
  auto reply = Reply<std::string>::make();
  impl_->decoder->router.post(RegisterAdapter{name, std::move(adapter), reply});
  if (std::string error = reply->wait(); !error.empty()) throw Error(error);
}

void Engine::unload_adapter(const std::string& name) {
  if (!impl_->decoder) throw Error("no adapter is named '" + name + "'");
  auto reply = Reply<std::string>::make();
  impl_->decoder->router.post(UnregisterAdapter{name, reply});
  if (std::string error = reply->wait(); !error.empty()) throw Error(error);
}

void Engine::shutdown() {
  Impl& m = *impl_;
  if (m.shut_down.exchange(true)) return;
  m.accepting.store(false);
  while (m.submitting.load() > 0) std::this_thread::yield();
  if (m.decoder) m.decoder->shutdown();
  else m.encoder->shutdown();
}

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_bos, bool parse_special) const {
  return impl_->model.tokenizer.encode(text, add_bos, parse_special);
}

std::string Engine::token_text(int32_t id) const { return impl_->model.tokenizer.token_text(id); }

std::string Engine::detokenize(const std::vector<int32_t>& ids) const {
  return impl_->model.tokenizer.decode(ids, false);
}

int32_t Engine::context_length() const { return impl_->model.config.context_length; }
int32_t Engine::vocab_size() const { return impl_->model.config.vocab_size; }
int32_t Engine::eos_id() const { return impl_->model.tokenizer.eos_id(); }
std::vector<int32_t> Engine::eog_ids() const { return impl_->model.tokenizer.eog_ids(); }
std::optional<std::string> Engine::chat_template() const { return impl_->chat_template; }
bool Engine::add_bos() const { return impl_->model.tokenizer.add_bos(); }

std::vector<Engine::SpecialToken> Engine::special_tokens() const { return impl_->specials; }

ChatPrompt Engine::render_chat(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const {
  const Impl& m = *impl_;
  ChatPrompt prompt;
  if (!m.jinja_template) {
    prompt = chat::apply_template_prompt(m.chat_format, messages, options.add_generation_prompt);
    if (options.special_in_content) prompt.data_spans.clear();
    return prompt;
  }
  const Tokenizer& t = m.model.tokenizer;
  const std::string bos = token_spelling(t, t.bos_id());
  prompt = chat::render_chat_prompt(*m.jinja_template, messages, options, bos, token_spelling(t, t.eos_id()));
  // Templates that write {{ bos_token }} themselves (Llama 3, Gemma) would get a second BOS from
  // tokenize(prompt, add_bos(), true); as llama.cpp does, the leading one is left to the
  // tokenizer. A "BOS" that is the start of a message's text stays: it is not the template's.
  const bool bos_is_template_text = prompt.data_spans.empty() || prompt.data_spans.front().begin >= bos.size();
  if (t.add_bos() && !bos.empty() && prompt.text.starts_with(bos) && bos_is_template_text) {
    prompt.text.erase(0, bos.size());
    for (TextSpan& span : prompt.data_spans) {
      span.begin -= bos.size();
      span.end -= bos.size();
    }
  }
  return prompt;
}

std::vector<int32_t> Engine::tokenize(const ChatPrompt& prompt, bool add_bos) const {
  return impl_->model.tokenizer.encode(prompt.text, add_bos, std::span<const TextSpan>(prompt.data_spans));
}

std::vector<int32_t> Engine::tokenize(const ChatPrompt& prompt, bool add_bos, std::string_view image_marker,
                                      std::vector<int32_t>& image_positions) const {
  image_positions.clear();
  std::vector<int32_t> ids;
  const std::vector<ChatPrompt> pieces = split_at_marker(prompt, image_marker);
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (k > 0) image_positions.push_back(int32_t(ids.size()));
    const std::vector<int32_t> piece_ids = tokenize(pieces[k], add_bos && k == 0);
    ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
  }
  return ids;
}

std::string Engine::apply_chat_template(const std::vector<ChatMessage>& messages,
                                        const ChatTemplateOptions& options) const {
  return render_chat(messages, options).text;
}

std::string Engine::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return apply_chat_template(messages, options);
}

ChatFormat Engine::chat_format() const {
  const chat::Template& t = impl_->chat_format;
  ChatFormat f{chat::family_name(t.family), {}, {}};
  if (t.end_of_turn.empty()) return f;
  for (const SpecialToken& s : impl_->specials) {
    if (s.piece == t.end_of_turn) f.stop_token_ids.push_back(s.id);
  }
  if (f.stop_token_ids.empty()) f.stop_strings.push_back(t.end_of_turn);
  return f;
}

}  // namespace pagoda
