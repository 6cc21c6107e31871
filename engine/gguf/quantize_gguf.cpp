#include "engine/gguf/quantize_gguf.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "kernels/quant/quantize.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// The model's block count from "<architecture>.block_count", or else from the tensor names.
int block_count(const GgufFile& f, const std::vector<QuantTensor>& tensors) {
  if (const auto arch = f.get_string_opt("general.architecture")) {
    if (const auto n = f.get_uint_opt(*arch + ".block_count")) return int(*n);
  }
  int n = 0;
  for (const QuantTensor& t : tensors) {
    if (t.name.rfind("blk.", 0) == 0) n = std::max(n, std::atoi(t.name.c_str() + 4) + 1);
  }
  return n;
}

// Query heads per KV head ("<architecture>.attention.head_count" / "head_count_kv"), 1 when
// the file does not say.
int gqa_ratio(const GgufFile& f) {
  const auto arch = f.get_string_opt("general.architecture");
  if (!arch) return 1;
  const auto heads = f.get_uint_opt(*arch + ".attention.head_count");
  const auto kv_heads = f.get_uint_opt(*arch + ".attention.head_count_kv");
  return heads && kv_heads && *kv_heads > 0 ? int(*heads / *kv_heads) : 1;
}

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// Rows are independent in every ggml encoding, so they are quantized in parallel; the bytes do
// not depend on how the rows are split.
std::vector<std::byte> encode_rows(GgmlType type, const std::vector<float>& values, uint64_t row) {
  const kernels::BlockShape block = kernels::block_shape(type);
  const size_t row_bytes = size_t(row / uint64_t(block.elements)) * size_t(block.bytes);
  const size_t rows = values.size() / row;
  std::vector<std::byte> out(rows * row_bytes);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, rows, 16), [&](const tbb::blocked_range<size_t>& r) {
    kernels::quantize_row(type, values.data() + r.begin() * row, out.data() + r.begin() * row_bytes,
                          int64_t(r.size() * row));
  });
  return out;
}

}  // namespace

QuantizeReport quantize_gguf(const std::string& in_path, const std::string& out_path, QuantPreset preset) {
  const GgufFile f = GgufFile::open(in_path);
  std::vector<QuantTensor> tensors;
  for (const GgufTensorInfo& t : f.tensors()) tensors.push_back({t.name, t.shape, t.type});
  const std::vector<QuantChoice> choices = choose_quant_types(preset, tensors, block_count(f, tensors), gqa_ratio(f));

  GgufWriter w;
  for (const std::string& key : f.keys()) w.set(key, *f.find(key));
  w.set_u32("general.quantization_version", kGgmlQuantizationVersion);
  w.set_u32("general.file_type", quant_preset_file_type(preset));

  QuantizeReport report;
  for (size_t i : llama_tensor_order(tensors)) {
    const GgufTensorInfo& t = f.tensors()[i];
    const QuantChoice choice = choices[i];
    const std::string context = in_path + ": tensor '" + t.name + "'";
    report.tensors.push_back({t.name, t.shape, t.type, choice});
    report.bytes_in += t.n_bytes;
    if (choice.type == t.type) {
      w.add_tensor(t.name, ggml_shape(t.shape), t.type, f.tensor_bytes(t));
      report.bytes_out += t.n_bytes;
      continue;
    }
    if (!is_float_type(t.type)) {
      throw Error(context + ": is " + ggml_type_name(t.type) + "; requantizing to " + ggml_type_name(choice.type) +
                  " is not supported (quantize from the F32, F16 or BF16 model)");
    }
    const std::vector<float> values = f.read_f32(t);
    if (kernels::block_shape(choice.type).elements > 1) {
      for (size_t k = 0; k < values.size(); ++k) {
        if (!std::isfinite(values[k])) {
          throw Error(context + ": element " + std::to_string(k) + " is not finite; " + ggml_type_name(choice.type) +
                      " cannot encode it");
        }
      }
    }
    const std::vector<std::byte> encoded = encode_rows(choice.type, values, t.shape[0]);
    w.add_tensor(t.name, ggml_shape(t.shape), choice.type, encoded);
    report.bytes_out += encoded.size();
  }
  f.check_intact();  // never write zeros read from a file truncated under us
  w.write(out_path);
  return report;
}

}  // namespace pagoda
