// llama2.c checkpoints, legacy (version 0) format: seven int32 (dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means the classifier is
// stored separately), then the f32 weights in run.c's order.

#include <cstring>
#include <filesystem>

#include "engine/gguf/mapped_file.h"
#include "engine/model/model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

class WeightCursor {
 public:
  WeightCursor(std::span<const std::byte> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  std::vector<float> take(uint64_t count, const char* what) {
    const uint64_t need = count * sizeof(float);
    if (need > bytes_.size() - offset_) {
      throw Error(path_ + ": file is truncated: " + what + " needs " + std::to_string(need) +
                  " bytes at offset " + std::to_string(offset_) + " but the file has " +
                  std::to_string(bytes_.size()));
    }
    std::vector<float> out(count);
    std::memcpy(out.data(), bytes_.data() + offset_, need);
    offset_ += need;
    return out;
  }

  void skip(uint64_t count, const char* what) { take(count, what); }
  uint64_t offset() const { return offset_; }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  uint64_t offset_ = 0;
};

// Splits a stacked [n_layers][rows*cols] array into per-layer tensors.
void unstack(const std::vector<float>& stacked, std::vector<LayerWeights>& layers,
             std::vector<float> LayerWeights::*member) {
  const size_t per_layer = stacked.size() / layers.size();
  for (size_t l = 0; l < layers.size(); ++l) {
    auto first = stacked.begin() + static_cast<ptrdiff_t>(l * per_layer);
    layers[l].*member = std::vector<float>(first, first + static_cast<ptrdiff_t>(per_layer));
  }
}

}  // namespace

Model load_llama2c_model(const std::string& path, const std::string& tokenizer_path) {
  MappedFile file = MappedFile::open(path);
  auto bytes = file.bytes();
  constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);
  if (bytes.size() < kHeaderBytes) throw Error(path + ": file is truncated: no llama2.c header");
  int32_t header[7];
  std::memcpy(header, bytes.data(), kHeaderBytes);

  ModelConfig config;
  config.dim = header[0];
  config.ffn_dim = header[1];
  config.n_layers = header[2];
  config.n_heads = header[3];
  config.n_kv_heads = header[4];
  const bool shared_classifier = header[5] > 0;
  config.vocab_size = header[5] == INT32_MIN ? 0 : std::abs(header[5]);
  config.context_length = header[6];
  config.validate(path);

  const uint64_t dim = config.dim, ffn = config.ffn_dim, layers = config.n_layers;
  const uint64_t q_dim = uint64_t(config.n_heads) * config.head_dim(), kv_dim = config.kv_dim();
  const uint64_t vocab = config.vocab_size, head_dim = config.head_dim();

  WeightCursor cursor(bytes.subspan(kHeaderBytes), path);
  ModelWeights w;
  w.layers.resize(layers);
  w.token_embd = cursor.take(vocab * dim, "token_embedding_table");
  unstack(cursor.take(layers * dim, "rms_att_weight"), w.layers, &LayerWeights::attn_norm);
  unstack(cursor.take(layers * q_dim * dim, "wq"), w.layers, &LayerWeights::attn_q);
  unstack(cursor.take(layers * kv_dim * dim, "wk"), w.layers, &LayerWeights::attn_k);
  unstack(cursor.take(layers * kv_dim * dim, "wv"), w.layers, &LayerWeights::attn_v);
  unstack(cursor.take(layers * dim * q_dim, "wo"), w.layers, &LayerWeights::attn_output);
  unstack(cursor.take(layers * dim, "rms_ffn_weight"), w.layers, &LayerWeights::ffn_norm);
  unstack(cursor.take(layers * ffn * dim, "w1"), w.layers, &LayerWeights::ffn_gate);
  unstack(cursor.take(layers * dim * ffn, "w2"), w.layers, &LayerWeights::ffn_down);
  unstack(cursor.take(layers * ffn * dim, "w3"), w.layers, &LayerWeights::ffn_up);
  w.output_norm = cursor.take(dim, "rms_final_weight");
  // run.c's precomputed RoPE tables; we compute our own.
  cursor.skip(uint64_t(config.context_length) * head_dim / 2, "freq_cis_real");
  cursor.skip(uint64_t(config.context_length) * head_dim / 2, "freq_cis_imag");
  w.output = shared_classifier ? w.token_embd : cursor.take(vocab * dim, "wcls");
  if (cursor.offset() != bytes.size() - kHeaderBytes) {
    throw Error(path + ": " + std::to_string(bytes.size() - kHeaderBytes - cursor.offset()) +
                " unexpected bytes after the weights; the header does not match the file");
  }

  std::string tok_path = tokenizer_path;
  if (tok_path.empty()) tok_path = (std::filesystem::path(path).parent_path() / "tokenizer.bin").string();
  Tokenizer tokenizer = Tokenizer::from_llama2c(tok_path, config.vocab_size);
  return Model{path, config, std::move(w), std::move(tokenizer)};
}

}  // namespace pagoda
