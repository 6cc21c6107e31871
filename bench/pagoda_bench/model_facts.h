#pragma once
// What pagoda-bench reports about a model and needs for its rooflines, read from the GGUF
// itself (metadata and tensor table; no weight is read): llama-bench's model_type, model_size
// and model_n_params, and the bytes and flops one token costs.

#include <cstdint>
#include <string>

#include "pagoda/kv_cache_type.h"

namespace pagoda::benchtool {

struct ModelFacts {
  std::string path;
  std::string type;            // llama.cpp's description: "llama 1B Q4_K - Medium"
  uint64_t size_bytes = 0;     // every tensor's bytes (llama_model_size)
  uint64_t n_params = 0;       // every tensor's elements (llama_model_n_params)
  uint64_t decode_bytes = 0;   // weight bytes one decode step reads (see model_facts.cpp)
  uint64_t matrix_params = 0;  // elements of the layers' matrices: 2 flops each per prompt token
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t context_length = 0;

  // Bytes of keys and values one position holds over all layers in a cache of `type`.
  double kv_bytes_per_position(KvCacheType type) const;
  // Attention flops of one query at a context of `positions` (QK^T and AV, every layer).
  double attention_flops(double positions) const;
};

// Throws pagoda::Error naming the file for one that is not a GGUF model pagoda can read.
ModelFacts read_model_facts(const std::string& path);

}  // namespace pagoda::benchtool
