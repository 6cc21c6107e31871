#include "support/bert_models.h"

#include "support/test_support.h"
#include "testing/synth.h"

namespace pagoda::test {

ModelConfig small_bert(int32_t pooling_type) {
  ModelConfig c;
  c.arch = Architecture::Bert;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.ffn_dim = 128;
  c.vocab_size = 600, c.context_length = 64, c.norm_eps = 1e-12f, c.pooling_type = pooling_type;
  return c;
}

std::string write_bert(const std::string& name, const ModelConfig& config, GgmlType type, uint64_t seed) {
  return write_encoder(name, config, type, seed);
}

ModelConfig small_encoder(Architecture arch, int32_t pooling_type) {
  ModelConfig c = small_bert(pooling_type);
  c.arch = arch;
  if (arch == Architecture::NomicBert) c.rope_theta = 1000.0f;
  if (arch == Architecture::JinaBertV2) c.dim = 96, c.n_heads = 6, c.n_kv_heads = 6;
  return c;
}

std::string write_encoder(const std::string& name, const ModelConfig& config, GgmlType type, uint64_t seed,
                          bool jina_norms) {
  SynthSpec spec{config, seed};
  spec.jina_norms = jina_norms;
  if (type == GgmlType::Q8_0) spec.quant = parse_quant_preset("q8_0");
  const std::string path = scratch_path(name);
  write_synth_model(path, spec);
  return path;
}

}  // namespace pagoda::test
