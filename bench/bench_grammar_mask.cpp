// The grammar token mask on Llama 3's 128k vocabulary (../shared/vocab/ggml-vocab-llama-bpe.gguf)
// with the JSON grammar (tests/data/json.gbnf):
//   BM_MaskAtState/<state>  one fill_mask at a typical state (after '{', inside a string, inside
//                           a number, between values, deep inside nesting, inside a
//                           partial UTF-8 character), entries warm
//   BM_FirstMaskAtState/<state>  the same with a new TokenMask, so its entries are built inside
//   BM_MaskBruteForce       the same mask by checking every token against the matcher
//   BM_JsonDocumentWarm     fill_mask at every token of a ~1 kB JSON document as the vocabulary
//                           tokenizes it (time per token), entries warm: the steady state
//   BM_JsonDocumentCold     the same with a new TokenMask per pass, so the entries (the
//                           precomputation) are built on first use inside it
//   BM_Allows               one sampled-token check
//   BM_TrieBuild            building the vocabulary's trie
// Only fill_mask is timed in the document runs (manual time); `entries` counts the keys built.

#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/token_mask.h"
#include "engine/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace pagoda;
using namespace pagoda::grammar;

const std::string kVocab = std::string(PAGODA_SHARED_DIR) + "/vocab/ggml-vocab-llama-bpe.gguf";

const char* const kDocument = R"({
  "id": 48213,
  "name": "Ada Lovelace",
  "email": "ada@example.org",
  "active": true,
  "score": -12.75e-3,
  "tags": ["mathematics", "poetry", "analytical engine", "notes"],
  "address": {"street": "12 St James's Square", "city": "London", "zip": null},
  "history": [
    {"year": 1842, "event": "translated Menabrea's paper", "pages": 65},
    {"year": 1843, "event": "published the notes, with note G \u2014 the first program"}
  ],
  "greeting": "Grüße, 你好, Γειά σου",
  "matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
  "empty": {}, "nothing": []
}
)";

struct Setup {
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> token_bytes;
  std::vector<int32_t> excluded;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const Grammar> grammar;
  std::vector<int32_t> document_ids;
};

const Setup* setup(benchmark::State& state) {
  static std::unique_ptr<Setup> s;
  if (!std::filesystem::exists(kVocab)) {
    state.SkipWithError(("../shared/vocab is absent: no " + kVocab).c_str());
    return nullptr;
  }
  if (!s) {
    s = std::make_unique<Setup>();
    s->tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(GgufFile::open(kVocab)));
    s->excluded = s->tok->eog_ids();
    for (int32_t id = 0; id < s->tok->vocab_size(); ++id) {
      s->token_bytes.push_back(s->tok->token_text(id));
      if (s->tok->vocab().types[size_t(id)] == TokenType::Control) s->excluded.push_back(id);
    }
    s->trie = std::make_shared<const TokenTrie>(s->token_bytes, s->excluded);
    std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/json.gbnf");
    s->grammar = std::make_shared<const Grammar>(
        parse_gbnf(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())));
    s->document_ids = s->tok->encode(kDocument, false);
  }
  return s.get();
}

struct NamedState {
  const char* name;
  const char* prefix;
};

const NamedState kStates[] = {
    {"after_brace", "{"},
    {"in_string", "{\"name\": \"Ada Lov"},
    {"in_number", "{\"id\": 482"},
    {"between_values", "{\"id\": 48213, "},
    {"deep_in_string", "{\"a\": [{\"b\": [{\"c\": [\"x"},
    {"partial_char", "{\"greeting\": \"Gr\xC3"},
};

GrammarMatcher matcher_at(const Setup& s, const char* prefix) {
  GrammarMatcher m(s.grammar);
  if (!m.accept_utf8(prefix)) throw std::runtime_error(std::string("JSON grammar refuses ") + prefix);
  return m;
}

void BM_MaskAtState(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  const NamedState& named = kStates[state.range(0)];
  state.SetLabel(named.name);
  const TokenMask mask(s->grammar, s->trie);
  const GrammarMatcher m = matcher_at(*s, named.prefix);
  std::vector<uint64_t> bits;
  mask.fill_mask(m, bits);  // builds the entries
  size_t allowed = 0;
  for (const uint64_t w : bits) allowed += size_t(__builtin_popcountll(w));
  for (auto _ : state) {
    mask.fill_mask(m, bits);
    benchmark::DoNotOptimize(bits.data());
  }
  state.counters["allowed"] = double(allowed);
  state.counters["stacks"] = double(m.stack_count());
}

// The first mask at a state: its keys' entries are built inside (the precomputation).
void BM_FirstMaskAtState(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  const NamedState& named = kStates[state.range(0)];
  state.SetLabel(named.name);
  const GrammarMatcher m = matcher_at(*s, named.prefix);
  std::vector<uint64_t> bits;
  size_t entries = 0;
  for (auto _ : state) {
    const TokenMask mask(s->grammar, s->trie);
    mask.fill_mask(m, bits);
    entries = mask.cached_entries();
  }
  state.counters["entries"] = double(entries);
}

void BM_MaskBruteForce(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  const GrammarMatcher m = matcher_at(*s, kStates[state.range(0)].prefix);
  state.SetLabel(kStates[state.range(0)].name);
  std::vector<uint64_t> bits((size_t(s->trie->vocab_size()) + 63) / 64);
  for (auto _ : state) {
    std::fill(bits.begin(), bits.end(), 0);
    for (int32_t id = 0; id < s->trie->vocab_size(); ++id) {
      if (!s->trie->excluded(id) && m.accepts_utf8_prefix(s->trie->token(id)))
        bits[size_t(id) / 64] |= uint64_t(1) << (id % 64);
    }
    benchmark::DoNotOptimize(bits.data());
  }
}

// fill_mask at every token of the document; returns the seconds spent in fill_mask.
double mask_document(const Setup& s, const TokenMask& mask) {
  GrammarMatcher m(s.grammar);
  std::vector<uint64_t> bits;
  double seconds = 0;
  for (const int32_t id : s.document_ids) {
    const auto start = std::chrono::steady_clock::now();
    mask.fill_mask(m, bits);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!((bits[size_t(id) / 64] >> (id % 64)) & 1) || !m.accept_utf8(s.token_bytes[size_t(id)])) {
      throw std::runtime_error("the JSON grammar refuses the document at token " + std::to_string(id));
    }
  }
  return seconds;
}

void BM_JsonDocumentWarm(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  const TokenMask mask(s->grammar, s->trie);
  mask_document(*s, mask);
  for (auto _ : state) state.SetIterationTime(mask_document(*s, mask));
  state.counters["tokens"] = double(s->document_ids.size());
  state.counters["per_token"] = benchmark::Counter(
      double(s->document_ids.size()), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["entries"] = double(mask.cached_entries());
  state.counters["entry_bytes"] = double(mask.cached_bytes());
}

void BM_JsonDocumentCold(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  size_t entries = 0;
  for (auto _ : state) {
    const TokenMask mask(s->grammar, s->trie);
    state.SetIterationTime(mask_document(*s, mask));
    entries = mask.cached_entries();
  }
  state.counters["tokens"] = double(s->document_ids.size());
  state.counters["entries"] = double(entries);
}

void BM_Allows(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  const TokenMask mask(s->grammar, s->trie);
  const GrammarMatcher m = matcher_at(*s, kStates[1].prefix);
  const int32_t id = s->tok->encode("elace\"", false).front();
  for (auto _ : state) benchmark::DoNotOptimize(mask.allows(m, id));
}

void BM_TrieBuild(benchmark::State& state) {
  const Setup* s = setup(state);
  if (!s) return;
  for (auto _ : state) {
    const TokenTrie trie(s->token_bytes, s->excluded);
    benchmark::DoNotOptimize(trie.nodes().data());
    state.counters["nodes"] = double(trie.nodes().size());
  }
}

}  // namespace

BENCHMARK(BM_MaskAtState)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FirstMaskAtState)->DenseRange(0, 5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskBruteForce)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonDocumentWarm)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonDocumentCold)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Allows)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TrieBuild)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
