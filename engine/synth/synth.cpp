#include "engine/synth/synth.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_set>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "engine/synth/synth_random.h"
#include "engine/tokenizer/tokenizer.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  float symmetric() { return uniform_symmetric(rng_); }
  uint64_t below(uint64_t n) { return rng_() % n; }

 private:
  std::mt19937_64 rng_;
};

// Control tokens, the 256 byte tokens, single characters, then merges of earlier pieces with
// falling scores: a vocabulary on which SentencePiece BPE behaves as on a trained one.
TokenizerVocab synth_vocab(int32_t size, Random& rng) {
  TokenizerVocab v;
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, TokenType::Unknown);
  add("<s>", 0.0f, TokenType::Control);
  add("</s>", 0.0f, TokenType::Control);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0.0f, TokenType::Byte);
  }
  std::unordered_set<std::string> known;
  std::vector<std::string> pieces;
  auto add_piece = [&](const std::string& text) {
    if (int32_t(v.tokens.size()) >= size || !known.insert(text).second) return;
    add(text, -float(pieces.size()), TokenType::Normal);
    pieces.push_back(text);
  };
  add_piece("\xE2\x96\x81");  // "▁", SentencePiece's space
  for (char c = 'a'; c <= 'z'; ++c) add_piece(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) add_piece(std::string(1, c));
  for (char c : std::string("0123456789.,!?'\"-:;()")) add_piece(std::string(1, c));
  while (int32_t(v.tokens.size()) < size) {
    // Favour recent (longer) pieces on the left and short ones on the right, like real merges.
    const std::string& left = pieces[rng.below(pieces.size())];
    const std::string& right = pieces[rng.below(std::min<size_t>(pieces.size(), 64))];
    if (left.size() + right.size() <= 24) add_piece(left + right);
  }
  return v;
}

void add_matrix(GgufWriter& w, Random& rng, const SynthSpec& spec, const std::string& name,
                uint64_t rows, uint64_t cols) {
  // Uniform with variance 1/cols keeps activations O(1) through the layers.
  const float scale = std::sqrt(3.0f / float(cols));
  std::vector<float> data(rows * cols);
  for (float& x : data) x = scale * rng.symmetric();
  if (spec.type == GgmlType::F32) {
    w.add_tensor(name, {cols, rows}, data);
  } else {
    w.add_tensor(name, {cols, rows}, spec.type, encode_tensor(spec.type, data));
  }
}

void add_norm(GgufWriter& w, Random& rng, const std::string& name, uint64_t n) {
  std::vector<float> data(n);
  for (float& x : data) x = 1.0f + 0.1f * rng.symmetric();
  w.add_tensor(name, {n}, data);
}

// Llama 3.1's frequency factors in shape: 1 for the fastest quarter of the pairs, 8 for the
// slowest half, a ramp between.
std::vector<float> synth_rope_freqs(int32_t n_pairs) {
  std::vector<float> f(static_cast<size_t>(n_pairs));
  for (int32_t i = 0; i < n_pairs; ++i) {
    const float t = std::clamp((float(i) - n_pairs / 4.0f) / (n_pairs / 4.0f), 0.0f, 1.0f);
    f[size_t(i)] = 1.0f + 7.0f * t;
  }
  return f;
}

// Every tokenizer.* key of the GGUF at `path`, copied; returns its token count.
int32_t copy_vocab(GgufWriter& w, const std::string& path) {
  const GgufFile vocab = GgufFile::open(path);
  for (const std::string& key : vocab.keys()) {
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, *vocab.find(key));
  }
  const size_t n = vocab.get_string_array("tokenizer.ggml.tokens").size();
  if (n == 0 || n > size_t(1) << 24) throw Error(path + ": tokenizer.ggml.tokens has " + std::to_string(n) + " tokens");
  return int32_t(n);
}

void write_synth_vocab(GgufWriter& w, int32_t size, Random& rng) {
  TokenizerVocab vocab = synth_vocab(size, rng);
  std::vector<int32_t> types(vocab.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = int32_t(vocab.types[i]);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(vocab.tokens));
  w.set_f32_array("tokenizer.ggml.scores", std::move(vocab.scores));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
}

void add_bias(GgufWriter& w, Random& rng, const std::string& name, uint64_t n) {
  std::vector<float> data(n);
  for (float& x : data) x = 0.1f * rng.symmetric();
  w.add_tensor(name, {n}, data);
}

}  // namespace

ModelConfig synth_preset(const std::string& name) {
  ModelConfig c;
  c.vocab_size = 32000;
  c.context_length = 2048;
  if (name == "s15m") {
    c.dim = 288, c.n_layers = 6, c.n_heads = 6, c.n_kv_heads = 6, c.ffn_dim = 768;
  } else if (name == "s110m") {
    c.dim = 768, c.n_layers = 12, c.n_heads = 12, c.n_kv_heads = 12, c.ffn_dim = 2048;
  } else {
    throw Error("unknown model preset '" + name + "' (known: s15m, s110m)");
  }
  return c;
}

ModelConfig write_synth_model(const std::string& path, const SynthSpec& spec) {
  Random rng(spec.seed);
  GgufWriter w;
  ModelConfig c = spec.config;
  if (!spec.vocab_path.empty()) {
    c.vocab_size = copy_vocab(w, spec.vocab_path);
  } else {
    if (c.vocab_size < 512) throw Error("synthetic model: vocabulary must have at least 512 tokens");
    write_synth_vocab(w, c.vocab_size, rng);
  }
  c.validate("synthetic model");

  const std::string arch = architecture_name(c.arch);
  auto key = [&](const char* name) { return arch + "." + name; };
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "pagoda-synth (random weights, seed " + std::to_string(spec.seed) + ")");
  w.set_u32(key("context_length"), uint32_t(c.context_length));
  w.set_u32(key("embedding_length"), uint32_t(c.dim));
  w.set_u32(key("block_count"), uint32_t(c.n_layers));
  w.set_u32(key("feed_forward_length"), uint32_t(c.ffn_dim));
  w.set_u32(key("attention.head_count"), uint32_t(c.n_heads));
  w.set_u32(key("attention.head_count_kv"), uint32_t(c.n_kv_heads));
  if (c.key_length > 0) {
    w.set_u32(key("attention.key_length"), uint32_t(c.key_length));
    w.set_u32(key("attention.value_length"), uint32_t(c.key_length));
  }
  w.set_u32(key("rope.dimension_count"), uint32_t(c.head_dim()));
  w.set_f32(key("rope.freq_base"), c.rope_theta);
  if (c.rope_freq_scale != 1.0f) {
    w.set_string(key("rope.scaling.type"), "linear");
    w.set_f32(key("rope.scaling.factor"), 1.0f / c.rope_freq_scale);
  }
  w.set_f32(key("attention.layer_norm_rms_epsilon"), c.norm_eps);
  w.set_u32(key("vocab_size"), uint32_t(c.vocab_size));

  const uint64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  add_matrix(w, rng, spec, "token_embd.weight", c.vocab_size, dim);
  add_norm(w, rng, "output_norm.weight", dim);
  if (!spec.tied_output) add_matrix(w, rng, spec, "output.weight", c.vocab_size, dim);
  if (spec.rope_freqs) w.add_tensor("rope_freqs.weight", {head_dim / 2}, synth_rope_freqs(int32_t(head_dim / 2)));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add_norm(w, rng, p + "attn_norm.weight", dim);
    add_matrix(w, rng, spec, p + "attn_q.weight", q_dim, dim);
    add_matrix(w, rng, spec, p + "attn_k.weight", kv_dim, dim);
    add_matrix(w, rng, spec, p + "attn_v.weight", kv_dim, dim);
    if (c.has_qkv_bias()) {
      add_bias(w, rng, p + "attn_q.bias", q_dim);
      add_bias(w, rng, p + "attn_k.bias", kv_dim);
      add_bias(w, rng, p + "attn_v.bias", kv_dim);
    }
    if (c.has_qk_norm()) {
      add_norm(w, rng, p + "attn_q_norm.weight", head_dim);
      add_norm(w, rng, p + "attn_k_norm.weight", head_dim);
    }
    add_matrix(w, rng, spec, p + "attn_output.weight", dim, q_dim);
    add_norm(w, rng, p + "ffn_norm.weight", dim);
    add_matrix(w, rng, spec, p + "ffn_gate.weight", c.ffn_dim, dim);
    add_matrix(w, rng, spec, p + "ffn_up.weight", c.ffn_dim, dim);
    add_matrix(w, rng, spec, p + "ffn_down.weight", dim, c.ffn_dim);
  }
  w.write(path);
  return c;
}

}  // namespace pagoda
