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
  SynthSpec spec{config, seed};
  if (type == GgmlType::Q8_0) spec.quant = parse_quant_preset("q8_0");
  const std::string path = scratch_path(name);
  write_synth_model(path, spec);
  return path;
}

}  // namespace pagoda::test
