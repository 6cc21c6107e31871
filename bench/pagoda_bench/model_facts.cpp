#include "bench/pagoda_bench/model_facts.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "engine/gguf/gguf.h"
#include "kernels/kv_rows.h"
#include "pagoda/error.h"

namespace pagoda::benchtool {

namespace {

// llama.cpp's names of the file types (llama_ftype, GGUF general.file_type) pagoda reads.
const char* file_type_name(uint64_t file_type) {
  switch (file_type) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 32: return "BF16";
  }
  return "unknown, may not work";
}

// Without general.file_type llama.cpp names the type most tensors have, saying it guessed.
std::string guessed_file_type(const GgufFile& f) {
  std::map<GgmlType, int> count;
  GgmlType most = GgmlType::F32;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (++count[t.type] > count[most]) most = t.type;
  }
  static const std::map<GgmlType, uint64_t> file_types = {
      {GgmlType::F32, 0},   {GgmlType::F16, 1},   {GgmlType::Q4_0, 2}, {GgmlType::Q4_1, 3},
      {GgmlType::Q8_0, 7},  {GgmlType::Q5_0, 8},  {GgmlType::Q5_1, 9}, {GgmlType::Q4_K, 15},
      {GgmlType::Q5_K, 17}, {GgmlType::Q6_K, 18}, {GgmlType::BF16, 32}};
  const auto it = file_types.find(most);
  return std::string(it == file_types.end() ? "all F32" : file_type_name(it->second)) + " (guessed)";
}

// general.size_label ("1B", "135M") when the file has it, else the parameter count to two
// figures: llama.cpp's size classes come from per-architecture tables pagoda does not keep.
std::string size_label(const GgufFile& f, uint64_t n_params) {
  if (auto label = f.get_string_opt("general.size_label")) return *label;
  const double n = double(n_params);
  const auto [value, unit] = n >= 1e9   ? std::pair{n / 1e9, 'B'}
                             : n >= 1e6 ? std::pair{n / 1e6, 'M'}
                                        : std::pair{n / 1e3, 'K'};
  char buf[32];
  std::snprintf(buf, sizeof buf, value >= 100 ? "%.0f%c" : "%.2g%c", value, unit);
  return buf;
}

int32_t get_i32(const GgufFile& f, const std::string& key) { return int32_t(f.get_uint(key)); }

void read_shape(const GgufFile& f, ModelFacts& m) {
  const std::string arch = f.get_string("general.architecture");
  m.n_layers = get_i32(f, arch + ".block_count");
  m.n_heads = get_i32(f, arch + ".attention.head_count");
  m.n_kv_heads = int32_t(f.get_uint_opt(arch + ".attention.head_count_kv").value_or(uint64_t(m.n_heads)));
  const uint64_t dim = f.get_uint(arch + ".embedding_length");
  m.head_dim =
      int32_t(f.get_uint_opt(arch + ".attention.key_length").value_or(m.n_heads > 0 ? dim / uint64_t(m.n_heads) : 0));
  m.context_length = get_i32(f, arch + ".context_length");
}

// A decode step reads every weight once, except the embedding table, of which it reads the
// token's row, unless the model ties it to the classifier (no output.weight), which reads it
// whole, and a mixture of experts' expert tensors (`*_exps`), of which one token reads the
// expert_used_count experts it is routed to: the active bytes.
void count_tensors(const GgufFile& f, ModelFacts& m) {
  const bool tied = f.find_tensor("output.weight") == nullptr;
  const std::string arch = f.get_string("general.architecture");
  const uint64_t experts = f.get_uint_opt(arch + ".expert_count").value_or(0);
  const uint64_t used = f.get_uint_opt(arch + ".expert_used_count").value_or(0);
  for (const GgufTensorInfo& t : f.tensors()) {
    m.size_bytes += t.n_bytes;
    m.n_params += t.n_elements;
    const bool embedding = t.name == "token_embd.weight";
    const bool expert = experts > 0 && t.shape.size() == 3 && t.name.find("_exps.") != std::string::npos;
    m.decode_bytes += embedding && !tied ? t.n_bytes / t.shape.back()
                      : expert           ? t.n_bytes / experts * std::min(used, experts)
                                         : t.n_bytes;
    if (t.name.starts_with("blk.") && t.shape.size() == 2) m.matrix_params += t.n_elements;
  }
}

}  // namespace

double ModelFacts::kv_bytes_per_position(KvCacheType type) const {
  return double(n_layers) * 2.0 * n_kv_heads * double(kernels::kv_row_bytes(type, head_dim));
}

double ModelFacts::attention_flops(double positions) const {
  return double(n_layers) * 4.0 * n_heads * head_dim * positions;
}

ModelFacts read_model_facts(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  ModelFacts m;
  m.path = path;
  read_shape(f, m);
  if (!f.find_tensor("token_embd.weight")) throw Error(path + ": tensor 'token_embd.weight' is missing");
  count_tensors(f, m);
  const auto file_type_id = f.get_uint_opt("general.file_type");
  const std::string file_type = file_type_id ? file_type_name(*file_type_id) : guessed_file_type(f);
  m.type = f.get_string("general.architecture") + " " + size_label(f, m.n_params) + " " + file_type;
  return m;
}

}  // namespace pagoda::benchtool
