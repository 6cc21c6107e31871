#pragma once
// Internal to the GGUF loader: reading tensors by llama.cpp's names with their shapes checked,
// and one transformer block of any supported architecture (an encoder's embeddings too).

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model.h"

namespace pagoda {

// The tensor named `name` after checking its shape, given GGUF-style (innermost first);
// throws pagoda::Error naming the file and the tensor when it is missing or shaped otherwise.
const GgufTensorInfo& find_checked(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& shape);

// A small tensor (a norm, a bias), decoded to f32.
std::vector<float> read_vector(const GgufFile& f, const std::string& name, uint64_t n);

// A [rows][cols] matrix as a view into the mapping (GgufFile::open has checked that its bytes
// lie inside the file). One row may also be stored as a vector of cols.
WeightTensor view_matrix(const GgufFile& f, const std::string& name, uint64_t rows, uint64_t cols);

// The rows of a rank head's cls.output: the count of ARCH.classifier.output_labels, or 1 when
// the file has none. Throws pagoda::Error for none or more than 64.
uint64_t rank_labels(const GgufFile& f, const ModelConfig& c);

// An encoder's embedding tensors and, when the file has it, its rank head (bert: cls, cls.output
// or both; jina-bert-v2: cls alone, one score).
EncoderWeights read_encoder_weights(const GgufFile& f, const ModelConfig& c);

// Block `layer`'s weights as `c` describes them.
LayerWeights read_layer(const GgufFile& f, const ModelConfig& c, int32_t layer);

}  // namespace pagoda
