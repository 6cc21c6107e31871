#include "engine/gguf/ggml_types.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/dequantize.h"
#include "kernels/quant/quantize.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

constexpr uint64_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

}  // namespace

const char* ggml_type_name(GgmlType type) {
  const char* name = kernels::ggml_type_id_name(uint32_t(type));
  return name ? name : "unknown";
}

bool ggml_type_supported(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return true;
    default: return false;
  }
}

std::string ggml_type_id_string(uint32_t id) {
  const char* name = kernels::ggml_type_id_name(id);
  return name ? std::string(name) + " (" + std::to_string(id) + ")" : std::to_string(id);
}

uint64_t ggml_type_bytes(GgmlType type, uint64_t n_elements) {
  const kernels::BlockShape block = kernels::block_shape(type);
  if (block.elements == 0) throw Error("unsupported tensor type " + ggml_type_id_string(uint32_t(type)));
  const uint64_t block_elements = uint64_t(block.elements), block_bytes = uint64_t(block.bytes);
  if (n_elements % block_elements != 0) {
    throw Error(std::string(ggml_type_name(type)) + " needs a multiple of " + std::to_string(block_elements) +
                " values, not " + std::to_string(n_elements));
  }
  const uint64_t blocks = n_elements / block_elements;
  if (blocks > UINT64_MAX / block_bytes) throw Error("tensor size overflows");
  return blocks * block_bytes;
}

void ggml_check_n_dims(uint64_t n_dims, const std::string& context) {
  if (n_dims == 0 || n_dims > kMaxDims) {
    throw Error(context + ": has " + std::to_string(n_dims) + " dimensions (must be 1 to " + std::to_string(kMaxDims) +
                ")");
  }
}

GgmlTensorSize ggml_tensor_size(std::span<const uint64_t> shape, GgmlType type, const std::string& context) {
  auto error = [&](const std::string& what) { return Error(context + ": " + what); };
  ggml_check_n_dims(shape.size(), context);
  // ggml keeps element counts in int64_t.
  uint64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) throw error("dimension " + std::to_string(i) + " is 0");
    if (shape[i] > uint64_t(INT64_MAX) / n) throw error("element count overflows (too large a shape)");
    n *= shape[i];
  }
  // Quantized blocks never straddle rows.
  const auto block_elements = uint64_t(kernels::block_shape(type).elements);
  if (block_elements > 1 && shape[0] % block_elements != 0) {
    throw error(std::string(ggml_type_name(type)) + " rows must be a multiple of " + std::to_string(block_elements) +
                " elements, but shape[0] is " + std::to_string(shape[0]));
  }
  try {
    return {n, ggml_type_bytes(type, n)};
  } catch (const Error& e) {
    throw error(e.what());
  }
}

void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  if (src.size() != ggml_type_bytes(type, dst.size())) {
    throw Error("dequantize: " + std::to_string(src.size()) + " bytes do not hold " + std::to_string(dst.size()) + " " +
                ggml_type_name(type) + " values");
  }
  if (!ggml_type_supported(uint32_t(type)))
    throw Error(std::string("dequantize: cannot decode ") + ggml_type_id_string(uint32_t(type)) + " values");
  kernels::dequantize_row(type, src.data(), dst.data(), int64_t(dst.size()));
}

namespace {

#if defined(__SANITIZE_THREAD__)
// Debian's oneTBB is not built with ThreadSanitizer, which cannot see the hand-offs inside its
// scheduler and would flag every block a worker encodes; under TSan this stays on the calling
// thread (as the forward pass does, model_runner.cpp).
constexpr bool kParallelEncode = false;
#else
constexpr bool kParallelEncode = true;
#endif

}  // namespace

std::vector<std::byte> encode_tensor(GgmlType type, std::span<const float> values) {
  if (!ggml_type_supported(uint32_t(type))) {
    throw Error(std::string("encode_tensor: cannot encode ") + ggml_type_id_string(uint32_t(type)));
  }
  std::vector<std::byte> out(ggml_type_bytes(type, values.size()));
  // A block scale computed from a non-finite value poisons the whole block, so refuse it
  // (f16 and bf16 store infinities and NaN as themselves).
  if (kernels::block_shape(type).elements > 1) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        throw Error(std::string(ggml_type_name(type)) + " cannot encode the non-finite value " +
                    std::to_string(values[i]) + " (element " + std::to_string(i) + ")");
      }
    }
  }
  // Blocks are independent in every ggml encoding, so ranges of them are encoded in parallel;
  // the bytes do not depend on the split.
  const kernels::BlockShape block = kernels::block_shape(type);
  if (values.size() % size_t(block.elements) != 0) {
    throw Error(std::string(ggml_type_name(type)) + " cannot encode " + std::to_string(values.size()) +
                " values: not a whole number of " + std::to_string(block.elements) + "-value blocks");
  }
  const size_t blocks = values.size() / size_t(block.elements);
  auto encode = [&](const tbb::blocked_range<size_t>& r) {
    kernels::quantize_row(type, values.data() + r.begin() * size_t(block.elements),
                          out.data() + r.begin() * size_t(block.bytes), int64_t(r.size() * size_t(block.elements)));
  };
  const tbb::blocked_range<size_t> all(0, blocks, 1024);
  if (kParallelEncode) tbb::parallel_for(all, encode);
  else encode(all);
  return out;
}

}  // namespace pagoda
