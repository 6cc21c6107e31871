// llama2.c checkpoints, legacy (version 0) format: seven int32 (dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means the classifier is
// stored separately), then the f32 weights in run.c's order. The matrices are views into the
// mapped file, as for GGUF.

#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/gguf/mapped_file.h"
#include "engine/model/model.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// Walks the weight arrays in file order, checking each against the file's size before
// handing out a view of it, so a truncated file is an error here and never a fault later.
class WeightCursor {
 public:
  WeightCursor(std::span<const std::byte> bytes, const std::string& path, bool maps_file)
      : bytes_(bytes), path_(path), maps_file_(maps_file) {}

  // The next `count` floats, in place.
  const std::byte* take(uint64_t count, const char* what) {
    const uint64_t need = count * sizeof(float);
    if (need > bytes_.size() - offset_) {
      throw Error(path_ + ": file is truncated: " + what + " needs " + std::to_string(need) + " bytes at offset " +
                  std::to_string(offset_) + " but the file has " + std::to_string(bytes_.size()));
    }
    const std::byte* at = bytes_.data() + offset_;
    offset_ += need;
    return at;
  }

  std::vector<float> take_vector(uint64_t count, const char* what) {
    std::vector<float> out(count);
    std::memcpy(out.data(), take(count, what), count * sizeof(float));
    return out;
  }

  uint64_t offset() const { return offset_; }
  // The next [rows][cols] f32 matrix, in place.
  WeightTensor take_matrix(int64_t rows, int64_t cols, const char* what) {
    return WeightTensor{GgmlType::F32, take(uint64_t(rows) * uint64_t(cols), what), rows, cols, maps_file_};
  }
  bool maps_file() const { return maps_file_; }

 private:
  std::span<const std::byte> bytes_;
  const std::string& path_;
  bool maps_file_;  // the bytes are the file's pages (MappedFile::maps_file)
  uint64_t offset_ = 0;
};

// Views each layer's [rows][cols] slice of a stacked [n_layers][rows][cols] f32 array.
void unstack(WeightCursor& cursor, const char* what, int64_t rows, int64_t cols, std::vector<LayerWeights>& layers,
             WeightTensor LayerWeights::*member) {
  const uint64_t per_layer = uint64_t(rows) * uint64_t(cols);
  const std::byte* first = cursor.take(per_layer * layers.size(), what);
  for (size_t l = 0; l < layers.size(); ++l) {
    layers[l].*member =
        WeightTensor{GgmlType::F32, first + l * per_layer * sizeof(float), rows, cols, cursor.maps_file()};
  }
}

// Copies each layer's slice of a stacked [n_layers][n] f32 array of norms.
void unstack(WeightCursor& cursor, const char* what, uint64_t n, std::vector<LayerWeights>& layers,
             std::vector<float> LayerWeights::*member) {
  const std::byte* first = cursor.take(n * layers.size(), what);
  for (size_t l = 0; l < layers.size(); ++l) {
    std::vector<float>& out = layers[l].*member;
    out.resize(n);
    std::memcpy(out.data(), first + l * n * sizeof(float), n * sizeof(float));
  }
}

}  // namespace

Model load_llama2c_model(const std::string& path, const std::string& tokenizer_path, MappedFile::Load load) {
  auto file = std::make_shared<MappedFile>(MappedFile::open(path, load));
  const std::span<const std::byte> bytes = file->bytes();
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

  WeightCursor cursor(bytes.subspan(kHeaderBytes), path, file->maps_file());
  ModelWeights w;
  w.layers.resize(layers);
  w.token_embd = cursor.take_matrix(int64_t(vocab), int64_t(dim), "token_embedding_table");
  unstack(cursor, "rms_att_weight", dim, w.layers, &LayerWeights::attn_norm);
  unstack(cursor, "wq", q_dim, dim, w.layers, &LayerWeights::attn_q);
  unstack(cursor, "wk", kv_dim, dim, w.layers, &LayerWeights::attn_k);
  unstack(cursor, "wv", kv_dim, dim, w.layers, &LayerWeights::attn_v);
  unstack(cursor, "wo", dim, q_dim, w.layers, &LayerWeights::attn_output);
  unstack(cursor, "rms_ffn_weight", dim, w.layers, &LayerWeights::ffn_norm);
  unstack(cursor, "w1", ffn, dim, w.layers, &LayerWeights::ffn_gate);
  unstack(cursor, "w2", dim, ffn, w.layers, &LayerWeights::ffn_down);
  unstack(cursor, "w3", ffn, dim, w.layers, &LayerWeights::ffn_up);
  w.output_norm = cursor.take_vector(dim, "rms_final_weight");
  // run.c's precomputed RoPE tables; we compute our own.
  cursor.take(uint64_t(config.context_length) * head_dim / 2, "freq_cis_real");
  cursor.take(uint64_t(config.context_length) * head_dim / 2, "freq_cis_imag");
  w.output = shared_classifier ? w.token_embd : cursor.take_matrix(int64_t(vocab), int64_t(dim), "wcls");
  if (cursor.offset() != bytes.size() - kHeaderBytes) {
    throw Error(path + ": " + std::to_string(bytes.size() - kHeaderBytes - cursor.offset()) +
                " unexpected bytes after the weights; the header does not match the file");
  }

  std::string tok_path = tokenizer_path;
  if (tok_path.empty()) tok_path = (std::filesystem::path(path).parent_path() / "tokenizer.bin").string();
  Tokenizer tokenizer = Tokenizer::from_llama2c(tok_path, config.vocab_size);
  // The norms above were copied from the mapping; zeros would pass for a model.
  if (file->lost()) throw Error(path + ": the file changed while it was being loaded (truncated?)");
  const MappedFile* mapping = file.get();
  return Model{path, config, std::move(w), std::move(tokenizer), std::move(file), mapping};
}

}  // namespace pagoda
