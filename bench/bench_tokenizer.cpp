// Tokenizer throughput on a 1 MB text: encode (pre-tokenizer regexes + BPE merges, or
// SentencePiece merges) and decode, for the Llama 3 (llama-bpe), Qwen2 and Llama 2 (SPM)
// vocabularies of ../shared/vocab. The text is llama.cpp's 46 tokenizer test cases (many
// scripts, emoji, odd whitespace) and the four English paragraphs of ../shared/models/
// llamacpp-quant, repeated to 1 MiB. bytes_per_second is the throughput in text bytes.

#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace pagoda;

const std::string kShared = PAGODA_SHARED_DIR;
const char* const kVocabs[] = {"llama-bpe", "qwen2", "llama-spm"};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& megabyte_text() {
  static const std::string text = [] {
    std::string unit = read_all(kShared + "/vocab/ggml-vocab-llama-bpe.gguf.inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t at; (at = unit.find(sep)) != std::string::npos;) unit.replace(at, sep.size(), "\n");
    const std::string paragraphs = read_all(kShared + "/models/llamacpp-quant/paragraphs.json");
    if (!paragraphs.empty()) {
      for (const auto& p : nlohmann::json::parse(paragraphs)) unit += p.get<std::string>() + "\n\n";
    }
    std::string out;
    while (!unit.empty() && out.size() < (1u << 20)) out += unit;
    out.resize(std::min(out.size(), size_t(1) << 20));
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();  // whole chars
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    return out;
  }();
  return text;
}

const Tokenizer* vocab(int64_t index, benchmark::State& state) {
  static std::unique_ptr<Tokenizer> loaded[3];
  const std::string path = kShared + "/vocab/ggml-vocab-" + kVocabs[index] + ".gguf";
  if (!std::filesystem::exists(path) || megabyte_text().empty()) {
    state.SkipWithError(("../shared/vocab is absent: no " + path).c_str());
    return nullptr;
  }
  if (!loaded[index]) loaded[index] = std::make_unique<Tokenizer>(Tokenizer::from_gguf(GgufFile::open(path)));
  state.SetLabel(kVocabs[index]);
  return loaded[index].get();
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer* tok = vocab(state.range(0), state);
  if (!tok) return;
  const std::string& text = megabyte_text();
  size_t n_ids = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tok->encode(text, false);
    n_ids = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_ids);
}

void BM_Decode(benchmark::State& state) {
  const Tokenizer* tok = vocab(state.range(0), state);
  if (!tok) return;
  const std::string& text = megabyte_text();
  const std::vector<int32_t> ids = tok->encode(text, false);
  for (auto _ : state) {
    const std::string out = tok->decode(ids);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}

}  // namespace

BENCHMARK(BM_Encode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
