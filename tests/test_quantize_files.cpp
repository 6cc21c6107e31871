// Malformed quantized GGUF files: blocks cut short, a tensor type id out of range or of a type
// no file may hold, a type whose byte size does not fit the tensor's room. Each must be a
// pagoda::Error naming the file and the tensor, from the reader, the model loader and
// pagoda-quantize alike; never a crash (run under ASan).

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize_gguf.h"
#include "engine/model/model.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_0,   GgmlType::Q4_1,   GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                               GgmlType::Q4_K,   GgmlType::Q5_K,   GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K,
                               GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::F16,  GgmlType::BF16};

std::string tensor_name(GgmlType t) { return std::string("w.") + ggml_type_name(t); }

// One [256, 2] tensor of every type pagoda reads, in kTypes order.
std::string valid_file() {
  std::vector<float> values(512);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : values) v = normal(rng);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  for (GgmlType t : kTypes) w.add_tensor(tensor_name(t), {256, 2}, t, encode_tensor(t, values));
  const std::string path = test::scratch_path("all-types.gguf");
  w.write(path);
  return path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = test::scratch_path(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

// Where the type id of tensor `name` (2 dimensions) sits in the tensor infos: after the name's
// length and bytes, n_dims and the two dimensions.
size_t type_field(const std::string& bytes, const std::string& name) {
  uint64_t length = name.size();
  std::string key(reinterpret_cast<const char*>(&length), 8);
  key += name;
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  return at + key.size() + 4 + 2 * 8;
}

std::string with_type(std::string bytes, const std::string& name, uint32_t type) {
  std::memcpy(bytes.data() + type_field(bytes, name), &type, 4);
  return bytes;
}

// Every way of reading `path` must fail with an Error naming the file and containing `parts`.
void expect_refused(const std::string& path, const std::vector<std::string>& parts) {
  const std::vector<std::pair<const char*, std::function<void()>>> readers = {
      {"GgufFile::open", [&] { GgufFile::open(path); }},
      {"load_model", [&] { load_model(path); }},
      {"quantize_gguf", [&] { quantize_gguf(path, path + ".out", QuantPreset::Q8_0); }},
  };
  for (const auto& [reader, read] : readers) {
    try {
      read();
      ADD_FAILURE() << reader << " accepted " << path;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << reader << ": " << what;
      for (const std::string& p : parts) EXPECT_NE(what.find(p), std::string::npos) << reader << ": " << what;
    }
  }
}

TEST(QuantizedFiles, BlocksCutShortNameTheTensor) {
  const std::string path = valid_file();
  const std::string bytes = read_bytes(path);
  const GgufFile f = GgufFile::open(path);
  for (const GgufTensorInfo& t : f.tensors()) {
    // Mid-block, and one byte short of the tensor's end.
    const uint64_t start = f.data_offset() + t.offset;
    for (uint64_t cut : {start + t.n_bytes / 2 + 1, start + t.n_bytes - 1}) {
      SCOPED_TRACE(t.name + " cut at " + std::to_string(cut));
      expect_refused(write_bytes("cut-" + t.name + ".gguf", bytes.substr(0, cut)),
                     {"tensor '" + t.name + "'", "runs past the end"});
    }
  }
}

TEST(QuantizedFiles, TypeIdsOutOfRangeOrNotForFilesNameTheTensorAndType) {
  const std::string bytes = read_bytes(valid_file());
  const struct {
    uint32_t id;
    const char* says;
  } bad[] = {{200, "unsupported tensor type 200"},         {uint32_t(-1), "unsupported tensor type 4294967295"},
             {16, "unsupported tensor type IQ2_XXS (16)"}, {39, "unsupported tensor type MXFP4 (39)"},
             {15, "unsupported tensor type Q8_K (15)"},  // activations only
             {9, "unsupported tensor type Q8_1 (9)"}};
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_1, GgmlType::BF16}) {
    for (const auto& b : bad) {
      SCOPED_TRACE(tensor_name(t) + " as " + std::to_string(b.id));
      expect_refused(write_bytes("type.gguf", with_type(bytes, tensor_name(t), b.id)),
                     {"tensor '" + tensor_name(t) + "'", b.says});
    }
  }
}

TEST(QuantizedFiles, ATypeWhoseSizeDoesNotFitTheTensorsRoomIsRefused) {
  const std::string bytes = read_bytes(valid_file());
  // Declared as a type with more bytes per value than its room holds: it runs into the next
  // tensor (or past the end of the file, for the last one).
  const struct {
    GgmlType actual, declared;
  } cases[] = {{GgmlType::Q4_0, GgmlType::Q8_0},   {GgmlType::Q4_K, GgmlType::Q6_K},  {GgmlType::Q5_K, GgmlType::F32},
               {GgmlType::Q6_K, GgmlType::F16},    {GgmlType::BF16, GgmlType::F32},   {GgmlType::Q2_K, GgmlType::Q3_K},
               {GgmlType::IQ4_NL, GgmlType::Q8_0}, {GgmlType::Q3_K, GgmlType::IQ4_XS}};
  for (const auto& c : cases) {
    SCOPED_TRACE(tensor_name(c.actual) + " declared " + ggml_type_name(c.declared));
    const std::string path = write_bytes("size.gguf", with_type(bytes, tensor_name(c.actual), uint32_t(c.declared)));
    const bool last = c.actual == kTypes[std::size(kTypes) - 1];
    const std::string quoted = std::string(1, '\'').append(tensor_name(c.actual)).append(1, '\'');
    expect_refused(path, {quoted, last ? "runs past the end" : "overlap"});
  }
  // A K-quant needs rows of whole 256-element blocks: a [256, 2] Q4_0 tensor has them, but a
  // 32-element block type read as Q4_K from a [32, n] tensor would not.
  std::vector<float> values(64, 0.5f);
  GgufWriter w;
  w.add_tensor("small", {32, 2}, GgmlType::Q8_0, encode_tensor(GgmlType::Q8_0, values));
  const std::string small = test::scratch_path("small.gguf");
  w.write(small);
  expect_refused(write_bytes("small-k.gguf", with_type(read_bytes(small), "small", uint32_t(GgmlType::Q4_K))),
                 {"tensor 'small'", "Q4_K rows must be a multiple of 256"});
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS}) {
    expect_refused(write_bytes("small-k.gguf", with_type(read_bytes(small), "small", uint32_t(t))),
                   {"tensor 'small'", std::string(ggml_type_name(t)) + " rows must be a multiple of 256"});
  }
}

TEST(QuantizedFiles, TheValidFileReadsBackEveryType) {
  const GgufFile f = GgufFile::open(valid_file());
  ASSERT_EQ(f.tensors().size(), std::size(kTypes));
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::vector<float> v = f.read_f32(t);
    ASSERT_EQ(v.size(), 512u) << t.name;
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
}

}  // namespace
}  // namespace pagoda
