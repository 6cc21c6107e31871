#include "testing/synth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <span>
#include <unordered_set>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "testing/synth_random.h"
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

// Control tokens (<unk>, <s>, </s>, then `controls`), the 256 byte tokens, single characters,
// then merges of earlier pieces with falling scores: a vocabulary on which SentencePiece BPE
// behaves as on a trained one.
TokenizerVocab synth_vocab(int32_t size, const std::vector<std::string>& controls, Random& rng) {
  TokenizerVocab v;
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, TokenType::Unknown);
  add("<s>", 0.0f, TokenType::Control);
  add("</s>", 0.0f, TokenType::Control);
  for (const std::string& control : controls) add(control, 0.0f, TokenType::Control);
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

// One tensor of the model: its name and shape, and how its values are drawn.
struct SynthTensor {
  // Table: a matrix drawn like one that a row is looked up in (bert's positions and token
  // types), kept F32 as llama-quantize keeps it. LabelRows: a decoder reranker's head, the
  // classifier's rows of its labels' tokens (convert_hf_to_gguf.py copies the lm_head's).
  enum class Kind { Matrix, Table, Norm, Bias, RopeFreqs, RopeFactorsShort, GateVector, LabelRows };
  std::string name;
  std::vector<uint64_t> shape;  // GGUF order
  Kind kind;
};

std::vector<float> matrix_values(Random& rng, uint64_t rows, uint64_t cols) {
  // Uniform with variance 1/cols keeps activations O(1) through the layers.
  const float scale = std::sqrt(3.0f / float(cols));
  std::vector<float> data(rows * cols);
  for (float& x : data) x = scale * rng.symmetric();
  return data;
}

std::vector<float> norm_values(Random& rng, uint64_t n) {
  std::vector<float> data(n);
  for (float& x : data) x = 1.0f + 0.1f * rng.symmetric();
  return data;
}

std::vector<float> bias_values(Random& rng, uint64_t n) {
  std::vector<float> data(n);
  for (float& x : data) x = 0.1f * rng.symmetric();
  return data;
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

// Phi-3's short factors in shape: close to 1, rising slowly with the pair's wavelength.
std::vector<float> synth_rope_factors_short(int32_t n_pairs) {
  std::vector<float> f(static_cast<size_t>(n_pairs));
  for (int32_t i = 0; i < n_pairs; ++i) f[size_t(i)] = 1.0f + 0.5f * float(i) / float(n_pairs);
  return f;
}

// A WordPiece vocabulary in BERT's layout, which llama.cpp's defaults for "bert" assume:
// [PAD] 0, [unused*] up to [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103; then, in llama.cpp's
// spelling, word starts ("▁" + piece) and continuations (bare): single characters first, so
// every lower-case ASCII text tokenizes without [UNK], then random letter runs.
void write_synth_wpm_vocab(GgufWriter& w, int32_t size, Random& rng) {
  std::vector<std::string> tokens = {"[PAD]"};
  std::vector<int32_t> types = {int32_t(TokenType::Control)};
  for (int i = 1; i < 100; ++i) {
    tokens.push_back("[unused" + std::to_string(i - 1) + "]");
    types.push_back(int32_t(TokenType::Control));
  }
  for (const char* special : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    tokens.push_back(special);
    types.push_back(int32_t(special == std::string("[UNK]") ? TokenType::Unknown : TokenType::Control));
  }
  std::unordered_set<std::string> known(tokens.begin(), tokens.end());
  auto add = [&](const std::string& text) {
    if (int32_t(tokens.size()) < size && known.insert(text).second) {
      tokens.push_back(text);
      types.push_back(int32_t(TokenType::Normal));
    }
  };
  const std::string word_start = "\xE2\x96\x81";  // "▁"
  const std::string chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"-:;()";
  for (char c : chars) add(word_start + c);
  for (char c : chars) add(std::string(1, c));
  while (int32_t(tokens.size()) < size) {
    std::string piece;
    for (uint64_t n = 2 + rng.below(6); n > 0; --n) piece += char('a' + rng.below(26));
    add(rng.below(2) == 0 ? word_start + piece : piece);
  }
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string_array("tokenizer.ggml.tokens", std::move(tokens));
  w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  w.set_u32("tokenizer.ggml.token_type_count", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 100);
  w.set_u32("tokenizer.ggml.seperator_token_id", 102);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_u32("tokenizer.ggml.cls_token_id", 101);
  w.set_u32("tokenizer.ggml.mask_token_id", 103);
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

void write_synth_vocab(GgufWriter& w, int32_t size, const std::vector<std::string>& controls, Random& rng) {
  TokenizerVocab vocab = synth_vocab(size, controls, rng);
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

}  // namespace

namespace {

constexpr int32_t kRankPooling = 4;  // llama.cpp's LLAMA_POOLING_TYPE_RANK

// A qwen3 reranker's labels (ARCH.classifier.output_labels) and its prompt
// (tokenizer.chat_template.rerank), as convert_hf_to_gguf.py writes Qwen3-Reranker's.
const std::vector<std::string> kRankLabels = {"yes", "no"};
constexpr const char* kQwen3RerankTemplate =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a "
    "web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: "
    "{document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

// The token ids of the labels in the copied vocabulary `path`, which must hold each as a token.
std::vector<int32_t> label_ids(const std::string& path) {
  if (path.empty()) {
    throw Error(
        "synthetic model: a qwen3 reranker needs a vocabulary holding the tokens \"yes\" and \"no\" "
        "(--vocab FILE, e.g. ggml-vocab-qwen2.gguf)");
  }
  const std::vector<std::string> tokens = GgufFile::open(path).get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> ids;
  for (const std::string& label : kRankLabels) {
    const auto it = std::find(tokens.begin(), tokens.end(), label);
    if (it == tokens.end()) throw Error(path + ": no token \"" + label + "\" for a reranker's label");
    ids.push_back(int32_t(it - tokens.begin()));
  }
  return ids;
}

ModelConfig shape(Architecture arch, int32_t dim, int32_t layers, int32_t heads, int32_t kv_heads, int32_t ffn,
                  int32_t context, float rope_theta, float norm_eps, int32_t key_length = 0) {
  ModelConfig c;
  c.arch = arch, c.dim = dim, c.n_layers = layers, c.n_heads = heads, c.n_kv_heads = kv_heads, c.ffn_dim = ffn;
  c.vocab_size = 32000, c.context_length = context, c.rope_theta = rope_theta, c.norm_eps = norm_eps;
  c.key_length = key_length;
  return c;
}

// The tensors in the order their values are drawn (the writer's order before pagoda-synth
// wrote in bounded memory, kept so every seed still gives the same weights).
// An encoder's tensors in the order convert_hf_to_gguf.py writes them (the Hugging Face
// checkpoint's), by llama.cpp's names. bert: learned positions, biased Q/K/V, a biased GELU
// FFN, and the rank head (cls.*) when the pooling is rank (jina-bert-v2 too, with one score's
// cls alone). nomic-bert: fused attn_qkv, no
// biases, ffn_gate. jina-bert-v2: biased Q/K/V, ffn_gate and a biased ffn_down, and with
// `jina_norms` its optional LayerNorms (attn_q_norm, attn_k_norm, attn_norm_2).
std::vector<SynthTensor> encoder_tensors(const ModelConfig& c, bool jina_norms) {
  using Kind = SynthTensor::Kind;
  const uint64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.ffn_dim;
  const bool bert = c.arch == Architecture::Bert, nomic = c.arch == Architecture::NomicBert;
  const bool jina = c.arch == Architecture::JinaBertV2;
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", {dim, uint64_t(c.vocab_size)}, Kind::Matrix});
  if (bert) t.push_back({"position_embd.weight", {dim, uint64_t(c.context_length)}, Kind::Table});
  t.push_back({"token_types.weight", {dim, uint64_t(c.n_token_types)}, Kind::Table});
  t.push_back({"token_embd_norm.weight", {dim}, Kind::Norm});
  t.push_back({"token_embd_norm.bias", {dim}, Kind::Bias});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (nomic) {
      t.push_back({p + "attn_qkv.weight", {dim, q_dim + 2 * kv_dim}, Kind::Matrix});
    } else {
      for (const auto& [name, rows] : {std::pair{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}}) {
        t.push_back({p + name + ".weight", {dim, rows}, Kind::Matrix});
        t.push_back({p + name + ".bias", {rows}, Kind::Bias});
        if (jina && jina_norms && name != std::string("attn_v")) {
          t.push_back({p + name + "_norm.weight", {dim}, Kind::Norm});
          t.push_back({p + name + "_norm.bias", {dim}, Kind::Bias});
        }
      }
    }
    t.push_back({p + "attn_output.weight", {q_dim, dim}, Kind::Matrix});
    if (!nomic) t.push_back({p + "attn_output.bias", {dim}, Kind::Bias});
    t.push_back({p + "attn_output_norm.weight", {dim}, Kind::Norm});
    t.push_back({p + "attn_output_norm.bias", {dim}, Kind::Bias});
    if (jina && jina_norms) {
      t.push_back({p + "attn_norm_2.weight", {dim}, Kind::Norm});
      t.push_back({p + "attn_norm_2.bias", {dim}, Kind::Bias});
    }
    t.push_back({p + "ffn_up.weight", {dim, ffn}, Kind::Matrix});
    if (bert) t.push_back({p + "ffn_up.bias", {ffn}, Kind::Bias});
    if (!bert) t.push_back({p + "ffn_gate.weight", {dim, ffn}, Kind::Matrix});
    t.push_back({p + "ffn_down.weight", {ffn, dim}, Kind::Matrix});
    if (!nomic) t.push_back({p + "ffn_down.bias", {dim}, Kind::Bias});
    t.push_back({p + "layer_output_norm.weight", {dim}, Kind::Norm});
    t.push_back({p + "layer_output_norm.bias", {dim}, Kind::Bias});
  }
  if (bert && c.pooling_type == kRankPooling) {
    t.push_back({"cls.weight", {dim, dim}, Kind::Matrix});
    t.push_back({"cls.bias", {dim}, Kind::Bias});
    t.push_back({"cls.output.weight", {dim, 1}, Kind::Matrix});
    t.push_back({"cls.output.bias", {1}, Kind::Bias});
  }
  if (jina && c.pooling_type == kRankPooling) {  // jina-reranker-v1's: one score, no cls.output
    t.push_back({"cls.weight", {dim, 1}, Kind::Matrix});
    t.push_back({"cls.bias", {1}, Kind::Bias});
  }
  return t;
}

std::vector<SynthTensor> synth_tensors(const ModelConfig& c, const SynthSpec& spec) {
  using Kind = SynthTensor::Kind;
  if (c.is_encoder()) return encoder_tensors(c, spec.jina_norms);
  const uint64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), head_dim = c.head_dim();
  const uint64_t vocab = c.vocab_size, ffn = c.ffn_dim;
  const uint64_t pairs = uint64_t(c.rotated_dims()) / 2;
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", {dim, vocab}, Kind::Matrix});
  t.push_back({"output_norm.weight", {dim}, Kind::Norm});
  if (!spec.tied_output) t.push_back({"output.weight", {dim, vocab}, Kind::Matrix});
  if (spec.rope_freqs) t.push_back({"rope_freqs.weight", {pairs}, Kind::RopeFreqs});
  if (spec.longrope) {
    t.push_back({"rope_factors_long.weight", {pairs}, Kind::RopeFreqs});
    t.push_back({"rope_factors_short.weight", {pairs}, Kind::RopeFactorsShort});
  }
  const bool phi3 = c.arch == Architecture::Phi3;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {dim}, Kind::Norm});
    if (phi3) {
      t.push_back({p + "attn_qkv.weight", {dim, q_dim + 2 * kv_dim}, Kind::Matrix});
    } else {
      t.push_back({p + "attn_q.weight", {dim, q_dim}, Kind::Matrix});
      t.push_back({p + "attn_k.weight", {dim, kv_dim}, Kind::Matrix});
      t.push_back({p + "attn_v.weight", {dim, kv_dim}, Kind::Matrix});
    }
    if (c.has_qkv_bias()) {
      t.push_back({p + "attn_q.bias", {q_dim}, Kind::Bias});
      t.push_back({p + "attn_k.bias", {kv_dim}, Kind::Bias});
      t.push_back({p + "attn_v.bias", {kv_dim}, Kind::Bias});
    }
    if (c.has_qk_norm()) {
      t.push_back({p + "attn_q_norm.weight", {head_dim}, Kind::Norm});
      t.push_back({p + "attn_k_norm.weight", {head_dim}, Kind::Norm});
    }
    t.push_back({p + "attn_output.weight", {q_dim, dim}, Kind::Matrix});
    if (c.has_post_norms()) t.push_back({p + "post_attention_norm.weight", {dim}, Kind::Norm});
    t.push_back({p + "ffn_norm.weight", {dim}, Kind::Norm});
    if (c.has_experts()) {
      const uint64_t n = c.n_experts, eff = c.moe_ffn_dim();
      t.push_back({p + "ffn_gate_inp.weight", {dim, n}, Kind::Matrix});
      t.push_back({p + "ffn_gate_exps.weight", {dim, eff, n}, Kind::Matrix});
      t.push_back({p + "ffn_up_exps.weight", {dim, eff, n}, Kind::Matrix});
      t.push_back({p + "ffn_down_exps.weight", {eff, dim, n}, Kind::Matrix});
      if (c.has_shared_expert()) {
        const uint64_t shared = c.shared_ffn_dim;
        t.push_back({p + "ffn_gate_inp_shexp.weight", {dim}, Kind::GateVector});
        t.push_back({p + "ffn_gate_shexp.weight", {dim, shared}, Kind::Matrix});
        t.push_back({p + "ffn_up_shexp.weight", {dim, shared}, Kind::Matrix});
        t.push_back({p + "ffn_down_shexp.weight", {shared, dim}, Kind::Matrix});
      }
    } else if (phi3) {
      t.push_back({p + "ffn_up.weight", {dim, 2 * ffn}, Kind::Matrix});
      t.push_back({p + "ffn_down.weight", {ffn, dim}, Kind::Matrix});
    } else {
      t.push_back({p + "ffn_gate.weight", {dim, ffn}, Kind::Matrix});
      t.push_back({p + "ffn_up.weight", {dim, ffn}, Kind::Matrix});
      t.push_back({p + "ffn_down.weight", {ffn, dim}, Kind::Matrix});
    }
    if (c.has_post_norms()) t.push_back({p + "post_ffw_norm.weight", {dim}, Kind::Norm});
  }
  if (c.arch == Architecture::Qwen3 && c.pooling_type == kRankPooling)
    t.push_back({"cls.output.weight", {dim, kRankLabels.size()}, Kind::LabelRows});
  return t;
}

std::vector<float> tensor_values(const SynthTensor& t, Random& rng) {
  switch (t.kind) {
    case SynthTensor::Kind::Matrix:
    case SynthTensor::Kind::Table: {
      uint64_t rows = 1;
      for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
      return matrix_values(rng, rows, t.shape[0]);
    }
    case SynthTensor::Kind::GateVector: return matrix_values(rng, 1, t.shape[0]);
    case SynthTensor::Kind::RopeFactorsShort: return synth_rope_factors_short(int32_t(t.shape[0]));
    case SynthTensor::Kind::Norm: return norm_values(rng, t.shape[0]);
    case SynthTensor::Kind::Bias: return bias_values(rng, t.shape[0]);
    case SynthTensor::Kind::RopeFreqs: return synth_rope_freqs(int32_t(t.shape[0]));
    case SynthTensor::Kind::LabelRows: break;  // copied from the classifier as it is written
  }
  throw Error("synthetic model: unknown tensor kind");
}

// Each tensor's stored type, and the order the file lists them in: the preset's choices in
// llama.cpp's order, as pagoda-quantize writes; else `spec.type` for matrices, in draw order.
std::vector<size_t> choose_types(const ModelConfig& c, const SynthSpec& spec, const std::vector<SynthTensor>& tensors,
                                 std::vector<GgmlType>& types) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  types.assign(tensors.size(), GgmlType::F32);
  if (!spec.quant) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].kind == SynthTensor::Kind::Matrix) types[i] = spec.type;
    }
    return order;
  }
  std::vector<QuantTensor> f32;
  for (const SynthTensor& t : tensors) f32.push_back({t.name, t.shape, GgmlType::F32});
  const std::vector<QuantChoice> choices =
      choose_quant_types(*spec.quant, f32, c.n_layers, c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 1);
  for (size_t i = 0; i < tensors.size(); ++i) types[i] = choices[i].type;
  return llama_tensor_order(f32);
}

// The ARCH.* keys of a decoder.
void write_decoder_keys(GgufWriter& w, const ModelConfig& c, const SynthSpec& spec) {
  const std::string arch = architecture_name(c.arch);
  auto key = [&](const char* name) { return arch + "." + name; };
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
  w.set_u32(key("rope.dimension_count"), uint32_t(c.rotated_dims()));
  w.set_f32(key("rope.freq_base"), c.rope_theta);
  if (c.has_mrope()) w.set_i32_array(key("rope.dimension_sections"), {c.rope_sections.begin(), c.rope_sections.end()});
  if (spec.longrope) {
    w.set_f32(key("rope.scaling.attn_factor"), c.rope_attn_factor);
    w.set_u32(key("rope.scaling.original_context_length"), uint32_t(c.rope_original_context));
  }
  if (c.is_gemma() || c.arch == Architecture::Phi3)
    w.set_u32(key("attention.sliding_window"), uint32_t(c.sliding_window));
  if (c.attn_softcap > 0.0f) w.set_f32(key("attn_logit_softcapping"), c.attn_softcap);
  if (c.final_softcap > 0.0f) w.set_f32(key("final_logit_softcapping"), c.final_softcap);
  if (c.has_experts()) {
    w.set_u32(key("expert_count"), uint32_t(c.n_experts));
    w.set_u32(key("expert_used_count"), uint32_t(c.n_experts_used));
    w.set_u32(key("expert_feed_forward_length"), uint32_t(c.moe_ffn_dim()));
    if (c.has_shared_expert()) w.set_u32(key("expert_shared_feed_forward_length"), uint32_t(c.shared_ffn_dim));
  }
  if (c.rope_freq_scale != 1.0f) {
    w.set_string(key("rope.scaling.type"), "linear");
    w.set_f32(key("rope.scaling.factor"), 1.0f / c.rope_freq_scale);
  }
  w.set_f32(key("attention.layer_norm_rms_epsilon"), c.norm_eps);
  w.set_u32(key("vocab_size"), uint32_t(c.vocab_size));
  if (c.pooling_type >= 0) w.set_u32(key("pooling_type"), uint32_t(c.pooling_type));
}

// An encoder's keys, those convert_hf_to_gguf.py writes: a LayerNorm epsilon, attention marked
// non-causal, the pooling (written only when set, as the decoders'), and nomic-bert's RoPE base.
void write_encoder_keys(GgufWriter& w, const ModelConfig& c) {
  const std::string arch = architecture_name(c.arch);
  auto key = [&](const char* name) { return arch + "." + name; };
  w.set_u32(key("context_length"), uint32_t(c.context_length));
  w.set_u32(key("embedding_length"), uint32_t(c.dim));
  w.set_u32(key("feed_forward_length"), uint32_t(c.ffn_dim));
  w.set_u32(key("block_count"), uint32_t(c.n_layers));
  w.set_u32(key("attention.head_count"), uint32_t(c.n_heads));
  w.set_f32(key("attention.layer_norm_epsilon"), c.norm_eps);
  w.set_bool(key("attention.causal"), false);
  if (c.pooling_type >= 0) w.set_u32(key("pooling_type"), uint32_t(c.pooling_type));
  if (c.has_rope()) w.set_f32(key("rope.freq_base"), c.rope_theta);
  // Replaces a copied vocabulary's count: llama.cpp sizes token_types.weight by it.
  w.set_u32("tokenizer.ggml.token_type_count", uint32_t(c.n_token_types));
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  constexpr auto L = Architecture::Llama, Q2 = Architecture::Qwen2, Q3 = Architecture::Qwen3;
  static const std::vector<SynthPreset> presets = [] {
    std::vector<SynthPreset> p;
    p.push_back({"s15m", shape(L, 288, 6, 6, 6, 768, 2048, 10000.0f, 1e-5f), "", false, false});
    p.push_back({"s110m", shape(L, 768, 12, 12, 12, 2048, 2048, 10000.0f, 1e-5f), "", false, false});
    const std::string llama3 = "ggml-vocab-llama-bpe.gguf", qwen = "ggml-vocab-qwen2.gguf";
    p.push_back({"qwen2.5-0.5b", shape(Q2, 896, 24, 14, 2, 4864, 32768, 1e6f, 1e-6f), qwen, true, false});
    p.push_back({"llama-3.2-1b", shape(L, 2048, 16, 32, 8, 8192, 131072, 5e5f, 1e-5f), llama3, true, true});
    p.push_back({"qwen2.5-3b", shape(Q2, 2048, 36, 16, 2, 11008, 32768, 1e6f, 1e-6f), qwen, true, false});
    p.push_back({"llama-3.2-3b", shape(L, 3072, 28, 24, 8, 8192, 131072, 5e5f, 1e-5f), llama3, true, true});
    p.push_back({"llama-3.1-8b", shape(L, 4096, 32, 32, 8, 14336, 131072, 5e5f, 1e-5f), llama3, false, true});
    p.push_back({"qwen3-8b", shape(Q3, 4096, 36, 32, 8, 12288, 40960, 1e6f, 1e-6f, 128), qwen, false, false});
    ModelConfig a3b = shape(Architecture::Qwen3Moe, 2048, 48, 32, 4, 6144, 40960, 1e6f, 1e-6f, 128);
    a3b.n_experts = 128, a3b.n_experts_used = 8, a3b.expert_ffn_dim = 768;
    p.push_back({"qwen3-30b-a3b", a3b, qwen, false, false});
    return p;
  }();
  return presets;
}

const SynthPreset& find_synth_preset(const std::string& name) {
  std::string known;
  for (const SynthPreset& p : synth_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown model preset '" + name + "' (known: " + known + ")");
}

ModelConfig synth_preset(const std::string& name) { return find_synth_preset(name).config; }

ModelConfig write_synth_model(const std::string& path, const SynthSpec& given) {
  SynthSpec spec = given;
  // Gemma files have no output.weight: the classifier is always the token embedding.
  if (spec.config.is_gemma()) spec.tied_output = true;
  Random rng(spec.seed);
  GgufWriter w;
  ModelConfig c = spec.config;
  if (c.is_encoder() && c.n_token_types == 0) c.n_token_types = 2;  // BERT's sentences A and B
  if (!spec.control_tokens.empty() && (!spec.vocab_path.empty() || c.is_encoder()))
    throw Error("synthetic model: control_tokens go into the synthetic SentencePiece vocabulary only");
  if (!spec.vocab_path.empty()) {
    c.vocab_size = copy_vocab(w, spec.vocab_path);
  } else {
    if (c.vocab_size < 512) throw Error("synthetic model: vocabulary must have at least 512 tokens");
    if (c.is_encoder()) {
      write_synth_wpm_vocab(w, c.vocab_size, rng);
    } else {
      write_synth_vocab(w, c.vocab_size, spec.control_tokens, rng);
    }
  }
  if (c.has_mrope() && c.rope_sections == std::array<int32_t, 4>{}) {
    // Unless given, Qwen2-VL's split ([16, 24, 24] of 64 pairs) scaled to the head.
    const int32_t pairs = c.rotated_dims() / 2;
    c.rope_sections = {pairs / 4, pairs * 3 / 8, pairs - pairs / 4 - pairs * 3 / 8, 0};
  }
  c.validate("synthetic model");
  // Another decoder with rank pooling gets the key alone: a file that claims a head it lacks.
  const bool decoder_reranker = c.arch == Architecture::Qwen3 && c.pooling_type == kRankPooling;
  const std::vector<int32_t> labels = decoder_reranker ? label_ids(spec.vocab_path) : std::vector<int32_t>{};

  w.set_string("general.architecture", architecture_name(c.arch));
  w.set_string("general.name", "pagoda-synth (random weights, seed " + std::to_string(spec.seed) + ")");
  if (c.is_encoder()) {
    write_encoder_keys(w, c);
  } else {
    write_decoder_keys(w, c, spec);
  }
  if (decoder_reranker) {
    w.set_string_array(std::string(architecture_name(c.arch)) + ".classifier.output_labels", kRankLabels);
    w.set_string("tokenizer.chat_template.rerank", kQwen3RerankTemplate);
  }
  if (spec.quant) {
    w.set_u32("general.quantization_version", kGgmlQuantizationVersion);
    w.set_u32("general.file_type", quant_preset_file_type(*spec.quant));
  }

  const std::vector<SynthTensor> tensors = synth_tensors(c, spec);
  std::vector<GgmlType> types;
  for (size_t i : choose_types(c, spec, tensors, types)) {
    // A quantized file has its shapes as llama-quantize writes them.
    w.declare_tensor(tensors[i].name, spec.quant ? ggml_shape(tensors[i].shape) : tensors[i].shape, types[i]);
  }
  GgufTensorStream stream = w.open_stream(path);
  const std::string classifier = spec.tied_output ? "token_embd.weight" : "output.weight";
  std::vector<float> label_rows;  // the classifier's rows of the labels, once it is drawn
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<float> values =
        tensors[i].kind == SynthTensor::Kind::LabelRows ? label_rows : tensor_values(tensors[i], rng);
    if (decoder_reranker && tensors[i].name == classifier) {
      for (int32_t id : labels) {
        const auto row = values.begin() + ptrdiff_t(id) * ptrdiff_t(c.dim);
        label_rows.insert(label_rows.end(), row, row + c.dim);
      }
    }
    if (spec.attn_output_scale != 1.0f && tensors[i].name.ends_with("attn_output.weight"))
      for (float& x : values) x *= spec.attn_output_scale;
    if (types[i] == GgmlType::F32) {
      stream.write(tensors[i].name, std::as_bytes(std::span(values)));
    } else {
      stream.write(tensors[i].name, encode_tensor(types[i], values));
    }
  }
  stream.finish();
  return c;
}

}  // namespace pagoda
