// GGUF: writer → reader round trips, the real stories260K file, and malformed files, each of
// which must be a pagoda::Error naming the file and the problem (never a crash; run under ASan).

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/mapped_file.h"
#include "pagoda/error.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

// ---- helpers for writing raw bytes -------------------------------------------------------

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = test::scratch_path(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Little-endian fields appended one by one.
struct Bytes {
  std::string data;
  template <class T>
  Bytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    data.append(b, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    data += s;
    return *this;
  }
  Bytes& type(GgufType t) { return u32(uint32_t(t)); }
};

std::string kv_u32(std::string_view key, uint32_t v) { return Bytes().str(key).type(GgufType::UINT32).u32(v).data; }
std::string kv_string(std::string_view key, std::string_view v) {
  return Bytes().str(key).type(GgufType::STRING).str(v).data;
}

struct RawTensor {
  std::string name;
  std::vector<uint64_t> shape;
  uint32_t type = uint32_t(GgmlType::F32);
  uint64_t offset = 0;
};

// A GGUF file assembled field by field so a test can put anything in any field. The default
// is valid: two F32 tensors, "a" [8] at 0 and "b" [4, 2] at 32, in a 64-byte data section.
struct RawGguf {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors, n_kv;  // unset: the real counts
  std::vector<std::string> kvs = {kv_string("general.architecture", "llama"), kv_u32("answer", 42)};
  std::vector<RawTensor> tensors = {{"a", {8}}, {"b", {4, 2}, uint32_t(GgmlType::F32), 32}};
  uint64_t alignment = 32;
  std::string data = std::string(64, '\x01');

  std::string bytes() const {
    Bytes b;
    b.data = magic;
    b.u32(version).u64(n_tensors.value_or(tensors.size())).u64(n_kv.value_or(kvs.size()));
    for (const std::string& kv : kvs) b.data += kv;
    for (const RawTensor& t : tensors) {
      b.str(t.name).u32(uint32_t(t.shape.size()));
      for (uint64_t d : t.shape) b.u64(d);
      b.u32(t.type).u64(t.offset);
    }
    b.data.append((alignment - b.data.size() % alignment) % alignment, '\0');
    return b.data + data;
  }
};

// Opening `bytes` (written as `name`) must throw an Error naming the file and `phrase`.
void expect_error(const std::string& name, const std::string& bytes, const std::string& phrase) {
  const std::string path = write_file(name, bytes);
  try {
    GgufFile::open(path);
    ADD_FAILURE() << name << " opened; expected an error with '" << phrase << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << what;
  }
}

template <class F>
void expect_error_with(F&& f, const std::string& phrase) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << e.what();
  }
}

GgufValue string_array(std::vector<std::string> items) {
  GgufArray a{GgufType::STRING, {}};
  for (std::string& s : items) a.items.emplace_back(std::move(s));
  return GgufValue(std::move(a));
}

std::vector<float> random_values(size_t n, float scale) {
  std::vector<float> v(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (float& x : v) x = dist(rng);
  return v;
}

// A small valid file with metadata of several kinds and one tensor of each type.
std::string sample_file(const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.embedding_length", 64);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hello"});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f, -3.5f});
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  const std::vector<float> values = random_values(64, 1.0f);
  w.add_tensor("f32", {32, 2}, values);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    w.add_tensor(ggml_type_name(type), {32, 2}, type, encode_tensor(type, values));
  }
  const std::string path = test::scratch_path(name);
  w.write(path);
  return path;
}

// ---- MappedFile -----------------------------------------------------------------------------

TEST(MappedFile, MapsAFileAndNamesThePathOnErrors) {
  const std::string path = write_file("mapped.bin", "hello");
  MappedFile f = MappedFile::open(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.bytes().data()), f.bytes().size()), "hello");
  EXPECT_EQ(f.path(), path);
  MappedFile moved = std::move(f);
  EXPECT_EQ(moved.bytes().size(), 5u);

  EXPECT_TRUE(MappedFile::open(write_file("empty.bin", "")).bytes().empty());
  expect_error_with([] { MappedFile::open(test::scratch_path("missing.bin")); }, "missing.bin: cannot open");
  const std::string dir = test::scratch_path("a-directory");
  std::filesystem::create_directories(dir);
  expect_error_with([&] { MappedFile::open(dir); }, dir + ": is a directory");
}

// ---- round trips --------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryMetadataType) {
  std::vector<std::pair<std::string, GgufValue>> values = {
      {"u8", GgufValue(uint8_t(200))},
      {"i8", GgufValue(int8_t(-100))},
      {"u16", GgufValue(uint16_t(60000))},
      {"i16", GgufValue(int16_t(-30000))},
      {"u32", GgufValue(uint32_t(4000000000u))},
      {"i32", GgufValue(int32_t(-2000000000))},
      {"f32", GgufValue(1.5f)},
      {"bool", GgufValue(true)},
      {"string", GgufValue(std::string("héllo ▁world"))},
      {"empty string", GgufValue(std::string())},
      {"u64", GgufValue(uint64_t(1) << 60)},
      {"i64", GgufValue(-(int64_t(1) << 60))},
      {"f64", GgufValue(-2.25e300)},
      {"empty array", GgufValue(GgufArray{GgufType::INT64, {}})},
      {"u8 array", GgufValue(GgufArray{GgufType::UINT8, {GgufValue(uint8_t(1)), GgufValue(uint8_t(255))}})},
      {"bool array", GgufValue(GgufArray{GgufType::BOOL, {GgufValue(false), GgufValue(true)}})},
      {"f64 array", GgufValue(GgufArray{GgufType::FLOAT64, {GgufValue(0.5), GgufValue(-1e-300)}})},
      {"nested", GgufValue(GgufArray{GgufType::ARRAY,
                                     {string_array({"a", "bc"}), string_array({}),
                                      GgufValue(GgufArray{GgufType::INT16, {GgufValue(int16_t(-7))}})}})},
  };
  GgufValue deep(GgufArray{GgufType::UINT8, {GgufValue(uint8_t(9))}});
  for (int depth = 1; depth < kGgufMaxArrayDepth; ++depth) deep = GgufValue(GgufArray{GgufType::ARRAY, {deep}});
  values.emplace_back("deepest allowed", deep);

  GgufWriter w;
  for (const auto& [key, value] : values) w.set(key, value);
  w.set_u32("u32", 1);  // replaces in place: the key keeps its position
  w.set_u32("u32", 4000000000u);
  w.set_i32("set_i32", -5);
  w.set_u64("set_u64", 123);
  w.set_f32("set_f32", 0.25f);
  w.set_bool("set_bool", false);
  w.set_string("set_string", "x");
  w.set_string_array("set_string_array", {"p", "", "q"});
  w.set_f32_array("set_f32_array", {1.0f, -0.0f});
  w.set_i32_array("set_i32_array", {-1, 2});
  const std::string path = test::scratch_path("all-types.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_TRUE(f.tensors().empty());
  std::vector<std::string> want_keys;
  for (const auto& [key, value] : values) {
    want_keys.push_back(key);
    ASSERT_NE(f.find(key), nullptr) << key;
    EXPECT_EQ(f.find(key)->type(), value.type()) << key;
    EXPECT_TRUE(*f.find(key) == value) << key;
  }
  for (const char* key : {"set_i32", "set_u64", "set_f32", "set_bool", "set_string", "set_string_array",
                          "set_f32_array", "set_i32_array"}) {
    want_keys.push_back(key);
  }
  EXPECT_EQ(f.keys(), want_keys);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(*f.find("set_i32")->get_if<int32_t>(), -5);
  EXPECT_EQ(f.get_string_array("set_string_array"), (std::vector<std::string>{"p", "", "q"}));
  EXPECT_EQ(f.get_float_array("set_f32_array"), (std::vector<float>{1.0f, -0.0f}));
  EXPECT_EQ(f.get_int32_array("set_i32_array"), (std::vector<int32_t>{-1, 2}));
  EXPECT_EQ(f.get_bool_opt("set_bool"), false);
  const auto& nested = *f.find("nested")->get_if<GgufArray>();
  EXPECT_EQ(*nested.items[0].get_if<GgufArray>()->items[1].get_if<std::string>(), "bc");
}

TEST(GgufRoundTrip, TypedGettersConvertAndRangeCheck) {
  GgufWriter w;
  w.set("u8", GgufValue(uint8_t(7)));
  w.set("i64", GgufValue(int64_t(1) << 40));
  w.set("negative", GgufValue(int32_t(-3)));
  w.set("f64", GgufValue(0.5));
  w.set("huge f64", GgufValue(1e300));
  w.set_f32("f32", 2.5f);
  w.set_string("s", "text");
  w.set_bool("b", true);
  w.set("u8 array", GgufValue(GgufArray{GgufType::UINT8, {GgufValue(uint8_t(1)), GgufValue(uint8_t(2))}}));
  w.set("u64 array", GgufValue(GgufArray{GgufType::UINT64, {GgufValue(uint64_t(1)), GgufValue(uint64_t(1) << 40)}}));
  w.set("i8 array", GgufValue(GgufArray{GgufType::INT8, {GgufValue(int8_t(-128))}}));
  const std::string path = test::scratch_path("getters.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);

  EXPECT_EQ(f.get_uint("u8"), 7u);
  EXPECT_EQ(f.get_uint("i64"), uint64_t(1) << 40);
  EXPECT_EQ(f.get_uint_opt("absent"), std::nullopt);
  EXPECT_EQ(f.get_uint_opt("u8"), 7u);
  EXPECT_EQ(f.get_float("f32"), 2.5f);
  EXPECT_EQ(f.get_float("f64"), 0.5f);
  EXPECT_EQ(f.get_float("u8"), 7.0f);
  EXPECT_EQ(f.get_float("negative"), -3.0f);
  EXPECT_EQ(f.get_float_opt("absent"), std::nullopt);
  EXPECT_EQ(f.get_string("s"), "text");
  EXPECT_EQ(f.get_string_opt("absent"), std::nullopt);
  EXPECT_EQ(f.get_bool_opt("b"), true);
  EXPECT_EQ(f.get_bool_opt("absent"), std::nullopt);
  EXPECT_EQ(f.get_int32_array("u8 array"), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(f.get_int32_array("i8 array"), (std::vector<int32_t>{-128}));
  EXPECT_EQ(f.get_float_array("u8 array"), (std::vector<float>{1.0f, 2.0f}));

  const std::string at = path + ": key ";
  expect_error_with([&] { f.get_uint("absent"); }, at + "'absent' is missing");
  expect_error_with([&] { f.get_uint("negative"); }, at + "'negative' is -3");
  expect_error_with([&] { f.get_uint("s"); }, at + "'s' has type STRING");
  expect_error_with([&] { f.get_uint_opt("f32"); }, at + "'f32' has type FLOAT32");
  expect_error_with([&] { f.get_float("s"); }, at + "'s' has type STRING, expected a number");
  expect_error_with([&] { f.get_float("huge f64"); }, "out of range for float");
  expect_error_with([&] { f.get_string("u8"); }, at + "'u8' has type UINT8, expected STRING");
  expect_error_with([&] { f.get_string("absent"); }, at + "'absent' is missing");
  expect_error_with([&] { f.get_bool_opt("u8"); }, at + "'u8' has type UINT8, expected BOOL");
  expect_error_with([&] { f.get_string_array("s"); }, at + "'s' has type STRING, expected an array");
  expect_error_with([&] { f.get_string_array("u8 array"); }, at + "'u8 array' element 0 has type UINT8");
  expect_error_with([&] { f.get_int32_array("u64 array"); }, at + "'u64 array' element 1 is 1099511627776, out of");
  expect_error_with([&] { f.get_int32_array("absent"); }, at + "'absent' is missing");
}

TEST(GgufRoundTrip, EveryTensorType) {
  const std::vector<float> values = random_values(64 * 3, 4.0f);
  GgufWriter w;
  w.add_tensor("f32", {64, 3}, values);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    w.add_tensor(ggml_type_name(type), {64, 3}, type, encode_tensor(type, values));
  }
  w.add_tensor("vector", {5}, std::vector<float>{1, 2, 3, 4, 5});
  w.add_tensor("4d", {1, 2, 1, 3}, std::vector<float>{0, 1, 2, 3, 4, 5});
  const std::string path = test::scratch_path("tensors.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  ASSERT_EQ(f.tensors().size(), 6u);
  EXPECT_EQ(f.read_f32(*f.find_tensor("f32")), values);
  EXPECT_EQ(f.read_f32(*f.find_tensor("vector")), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(f.find_tensor("4d")->shape, (std::vector<uint64_t>{1, 2, 1, 3}));
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    const GgufTensorInfo& t = *f.find_tensor(ggml_type_name(type));
    EXPECT_EQ(t.type, type);
    EXPECT_EQ(t.shape, (std::vector<uint64_t>{64, 3}));
    EXPECT_EQ(t.n_elements, 192u);
    EXPECT_EQ(t.n_bytes, type == GgmlType::Q8_0 ? 6u * 34u : 192u * 2u);
    EXPECT_EQ(f.tensor_bytes(t).size(), t.n_bytes);
    const std::vector<float> got = f.read_f32(t);
    ASSERT_EQ(got.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      float tolerance = 0.0f;
      if (type == GgmlType::F16) tolerance = std::max(std::abs(values[i]) * 0x1p-11f, 0x1p-25f);
      if (type == GgmlType::BF16) tolerance = std::abs(values[i]) * 0x1p-8f;
      if (type == GgmlType::Q8_0) {
        float amax = 0.0f;
        for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::abs(values[j]));
        tolerance = amax / 127.0f;  // half a step of rounding plus the f16 scale's error
      }
      ASSERT_LE(std::abs(got[i] - values[i]), tolerance) << ggml_type_name(type) << " value " << i;
    }
  }
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;
}

TEST(GgufRoundTrip, Alignment64) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  w.add_tensor("a", {3}, std::vector<float>{1, 2, 3});
  w.add_tensor("b", {40}, random_values(40, 1.0f));
  w.add_tensor("c", {1}, std::vector<float>{9});
  const std::string path = test::scratch_path("align64.gguf");
  w.write(path);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor_bytes(t).data()) % 64, 0u) << t.name;
  }
  EXPECT_EQ(f.find_tensor("b")->offset, 64u);
  EXPECT_EQ(f.find_tensor("c")->offset, 256u);
  EXPECT_EQ(f.read_f32(*f.find_tensor("c")), std::vector<float>{9});
}

// Version 2 has the same layout as 3 (3 only added big-endian files), so patching the
// version field of a writer's file gives a genuine v2 file.
TEST(GgufRoundTrip, Version2) {
  std::string bytes = read_file(sample_file("v3.gguf"));
  bytes[4] = 2;
  const GgufFile f = GgufFile::open(write_file("v2.gguf", bytes));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.read_f32(*f.find_tensor("f32")), random_values(64, 1.0f));
}

// ---- f16 / bf16 -------------------------------------------------------------------------

TEST(GgufCodecs, HalfPrecisionIsExact) {
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  // Every non-NaN half survives half → float → half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << std::hex << h;
  }
  // Rounding: to nearest, ties to even, overflow to infinity, underflow to zero.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(f32_to_f16(0x1p-25f * 1.01f), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
}

TEST(GgufCodecs, BFloat16) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie → even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie → even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // low-bit NaN
}

TEST(GgufCodecs, Q8_0Blocks) {
  std::vector<float> v(32, 0.0f);
  v[0] = 127.0f, v[1] = -63.5f, v[2] = 1.0f;
  const std::vector<std::byte> q = encode_tensor(GgmlType::Q8_0, v);
  ASSERT_EQ(q.size(), 34u);
  std::vector<float> back(32);
  dequantize(GgmlType::Q8_0, q, back);
  EXPECT_EQ(back[0], 127.0f);
  EXPECT_EQ(back[1], -64.0f);  // round half away from zero, as ggml
  EXPECT_EQ(back[2], 1.0f);
  EXPECT_EQ(back[3], 0.0f);
  const std::vector<std::byte> zeros = encode_tensor(GgmlType::Q8_0, std::vector<float>(32, 0.0f));
  dequantize(GgmlType::Q8_0, zeros, back);
  EXPECT_EQ(back, std::vector<float>(32, 0.0f));
  expect_error_with([] { encode_tensor(GgmlType::Q8_0, std::vector<float>(33)); }, "multiple of 32");
  expect_error_with([] { encode_tensor(GgmlType::Q8_0, std::vector<float>(32, NAN)); }, "non-finite");
  std::vector<float> two_blocks(64);
  expect_error_with([&] { dequantize(GgmlType::Q8_0, q, two_blocks); }, "do not hold");
}

// ---- the real model -----------------------------------------------------------------------

TEST(GgufRealModel, Stories260K) {
  PAGODA_SHARED_OR_SKIP(path, test::kStoriesGguf);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.keys().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_uint("llama.block_count"), 5u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(embd->type, GgmlType::F32);
  for (const GgufTensorInfo& t : f.tensors()) {
    for (float x : f.read_f32(t)) ASSERT_TRUE(std::isfinite(x)) << t.name;
  }
}

// ---- malformed files ------------------------------------------------------------------------

TEST(GgufMalformed, TheRawBuilderMakesAValidFile) {
  const GgufFile f = GgufFile::open(write_file("raw-valid.gguf", RawGguf().bytes()));
  EXPECT_EQ(f.get_uint("answer"), 42u);
  EXPECT_EQ(f.find_tensor("b")->offset, 32u);
  EXPECT_EQ(f.read_f32(*f.find_tensor("b")).size(), 8u);
}

// Every cut through the header, metadata and tensor infos, and some through the data. (The
// padding after the last tensor may go: like llama.cpp, the reader does not need it.)
TEST(GgufMalformed, TruncatedAnywhere) {
  const std::string bytes = read_file(sample_file("whole.gguf"));
  const GgufFile whole = GgufFile::open(write_file("whole-copy.gguf", bytes));
  const GgufTensorInfo& last = whole.tensors().back();
  const size_t data_end = whole.data_offset() + last.offset + last.n_bytes;
  ASSERT_GT(bytes.size(), data_end);
  EXPECT_NO_THROW(GgufFile::open(write_file("no-final-padding.gguf", bytes.substr(0, data_end))));
  std::vector<size_t> cuts;
  for (size_t cut = 0; cut <= whole.data_offset(); ++cut) cuts.push_back(cut);
  for (size_t cut = whole.data_offset() + 1; cut < data_end; cut += 37) cuts.push_back(cut);
  cuts.push_back(data_end - 1);
  for (size_t cut : cuts) {
    const std::string path = write_file("cut.gguf", bytes.substr(0, cut));
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "a file cut at " << cut << " of " << bytes.size() << " bytes opened";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      const bool says_why = what.find("truncated") != std::string::npos ||
                            what.find("past the end") != std::string::npos ||
                            what.find("not a GGUF file") != std::string::npos;
      EXPECT_TRUE(says_why) << "cut at " << cut << ": " << what;
    }
  }
}

TEST(GgufMalformed, Header) {
  RawGguf raw;
  raw.magic = "GGUG";
  expect_error("bad-magic.gguf", raw.bytes(), "not a GGUF file");
  expect_error("empty.gguf", "", "not a GGUF file");
  raw = {};
  raw.version = 1;
  expect_error("v1.gguf", raw.bytes(), "version 1 is not supported");
  raw.version = 0x03000000;
  expect_error("big-endian.gguf", raw.bytes(), "big-endian");
  raw.version = 4;
  expect_error("v4.gguf", raw.bytes(), "unsupported GGUF version 4");
  raw = {};
  raw.n_tensors = uint64_t(1) << 61;
  expect_error("tensor-count.gguf", raw.bytes(), "tensor count 2305843009213693952 cannot fit");
  raw = {};
  raw.n_kv = ~uint64_t(0);
  expect_error("kv-count.gguf", raw.bytes(), "metadata key-value count 18446744073709551615 cannot fit");
}

TEST(GgufMalformed, Metadata) {
  // One level deeper than allowed: arrays of one array each, around an empty UINT8 array.
  // (An array element carries no type tag of its own: each level is element type, count.)
  Bytes deep;
  deep.str("deep").type(GgufType::ARRAY);
  for (int level = 0; level < kGgufMaxArrayDepth; ++level) deep.type(GgufType::ARRAY).u64(1);
  deep.type(GgufType::UINT8).u64(0);
  // Each case: one more metadata entry after the valid ones, and what refusing the file says.
  const struct {
    const char* name;
    std::string kv;
    const char* phrase;
  } cases[] = {
      {"string-length.gguf", Bytes().u64(uint64_t(1) << 62).data,
       "has string length 4611686018427387904, past the end"},
      {"value-length.gguf", Bytes().str("s").type(GgufType::STRING).u64(~uint64_t(0)).data,
       "key 's': string value at offset"},
      {"array-count.gguf", Bytes().str("arr").type(GgufType::ARRAY).type(GgufType::UINT32).u64(uint64_t(1) << 60).data,
       "key 'arr': array of 1152921504606846976 UINT32 at offset"},
      {"nested-array-count.gguf",
       Bytes().str("arr").type(GgufType::ARRAY).type(GgufType::ARRAY).u64(uint64_t(1) << 40).data, "cannot fit"},
      {"value-type.gguf", Bytes().str("odd").u32(77).u32(0).data, "key 'odd': unknown value type 77"},
      {"element-type.gguf", Bytes().str("arr").type(GgufType::ARRAY).u32(13).u64(0).data,
       "key 'arr': unknown value type 13"},
      {"bool.gguf", Bytes().str("flag").type(GgufType::BOOL).u8(2).data, "key 'flag': bool value is 2"},
      {"duplicate-key.gguf", kv_u32("answer", 43), "key 'answer': duplicate key"},
      // Every byte present, but 2^24 one-byte elements would take 40 times that in memory.
      {"entry-limit.gguf",
       Bytes().str("big").type(GgufType::ARRAY).type(GgufType::UINT8).u64(uint64_t(1) << 24).data +
           std::string(size_t(1) << 24, '\0'),
       "key 'big': more than 16777216 metadata values and tensors in all"},
      {"deep.gguf", deep.data, "nested deeper than 8 levels"},
      {"alignment-type.gguf", Bytes().str("general.alignment").type(GgufType::UINT64).u64(32).data,
       "'general.alignment': has type UINT64, expected UINT32"},
      {"alignment-48.gguf", kv_u32("general.alignment", 48), "48 is not a power of two"},
      {"alignment-0.gguf", kv_u32("general.alignment", 0), "0 is not a power of two"},
  };
  for (const auto& c : cases) {
    RawGguf raw;
    raw.kvs.push_back(c.kv);
    expect_error(c.name, raw.bytes(), c.phrase);
  }
}

TEST(GgufMalformed, TensorInfos) {
  RawGguf raw;
  raw.tensors[1].shape = {};
  expect_error("ndims-0.gguf", raw.bytes(), "tensor 'b': has 0 dimensions (must be 1 to 4)");
  raw.tensors[1].shape = {1, 1, 1, 1, 1, 1, 1, 1, 8};
  expect_error("ndims-9.gguf", raw.bytes(), "tensor 'b': has 9 dimensions");
  raw.tensors[1].shape = {4, 0};
  expect_error("dim-0.gguf", raw.bytes(), "tensor 'b': dimension 1 is 0");
  raw.tensors[1].shape = {uint64_t(1) << 32, uint64_t(1) << 32};
  expect_error("overflow.gguf", raw.bytes(), "tensor 'b': element count overflows");
  raw.tensors[1].shape = {uint64_t(1) << 40};
  expect_error("huge.gguf", raw.bytes(), "tensor 'b': data at offset 32 (4398046511104 bytes) runs past the end");
  raw = {};
  raw.tensors[1].type = 99;
  expect_error("type-99.gguf", raw.bytes(), "tensor 'b': unsupported tensor type 99");
  raw.tensors[1].type = 16;  // IQ2_XXS: a real ggml type, but not one pagoda reads
  expect_error("type-iq2.gguf", raw.bytes(), "tensor 'b': unsupported tensor type IQ2_XXS (16)");
  raw.tensors[1].type = 4;  // Q4_2: a type ggml has removed
  expect_error("type-q4_2.gguf", raw.bytes(), "unsupported tensor type Q4_2 (4)");
  raw = {};
  raw.tensors[1] = {"b", {16}, uint32_t(GgmlType::Q8_0), 32};
  expect_error("q8-row.gguf", raw.bytes(), "tensor 'b': Q8_0 rows must be a multiple of 32");
  raw = {};
  raw.tensors[1].name = "a";
  expect_error("duplicate-tensor.gguf", raw.bytes(), "tensor 'a': duplicate tensor name");
  raw = {};
  raw.tensors[1].offset = 48;
  expect_error("misaligned.gguf", raw.bytes(), "tensor 'b': offset 48 is misaligned");
  raw.tensors[1].offset = 64;
  expect_error("past-end.gguf", raw.bytes(), "tensor 'b': data at offset 64 (32 bytes) runs past the end");
  raw.tensors[1].offset = ~uint64_t(31);
  expect_error("far-past-end.gguf", raw.bytes(), "runs past the end");
  raw = {};
  raw.tensors[0].shape = {9};  // 36 bytes: runs into "b" at 32
  expect_error("overlap.gguf", raw.bytes(), "tensors 'a' and 'b' overlap");
  raw = {};
  raw.tensors[1].offset = 0;
  expect_error("same-offset.gguf", raw.bytes(), "overlap");
  raw = {};
  raw.data.resize(31);  // the last tensor is cut short
  expect_error("short-data.gguf", raw.bytes(), "runs past the end");
}

// Random damage to a valid file: an Error or a file that reads, never a crash (see ASan).
TEST(GgufMalformed, RandomCorruption) {
  const std::string bytes = read_file(sample_file("fuzz-source.gguf"));
  std::mt19937 rng(12345);
  int opened = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    std::string damaged = bytes;
    const int flips = 1 + int(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = rng() % std::min<size_t>(damaged.size(), 400);
      damaged[at] = char(rng() % 3 == 0 ? 0xff : rng());
    }
    const std::string path = write_file("fuzz.gguf", damaged);
    try {
      const GgufFile f = GgufFile::open(path);
      for (const GgufTensorInfo& t : f.tensors()) f.read_f32(t);
      ++opened;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_LT(opened, 1500);
}

// ---- writer errors ------------------------------------------------------------------------

TEST(GgufWriter, RefusesWhatTheReaderWouldRefuse) {
  GgufWriter w;
  w.add_tensor("t", {2}, std::vector<float>{1, 2});
  expect_error_with([&] { w.add_tensor("t", {1}, std::vector<float>{1}); }, "'t': duplicate tensor name");
  expect_error_with([&] { w.add_tensor("u", {3}, std::vector<float>{1, 2}); }, "'u': 8 bytes of data");
  expect_error_with([&] { w.add_tensor("u", {}, std::vector<float>{}); }, "'u': has 0 dimensions");
  expect_error_with([&] { w.add_tensor("u", {2, 0}, std::vector<float>{}); }, "dimension 1 is 0");
  expect_error_with(
      [&] {
        w.add_tensor("q", {16, 2}, GgmlType::Q8_0, std::vector<std::byte>(34));
      },
      "Q8_0 rows must be a multiple of 32");
  expect_error_with(
      [&] {
        w.set("mixed", GgufValue(GgufArray{GgufType::UINT8, {GgufValue(uint8_t(1)), GgufValue(int8_t(1))}}));
      },
      "element 1 has type INT8 in an array of UINT8");
  GgufValue deep(GgufArray{GgufType::UINT8, {}});
  for (int depth = 0; depth < kGgufMaxArrayDepth; ++depth) deep = GgufValue(GgufArray{GgufType::ARRAY, {deep}});
  expect_error_with([&] { w.set("deep", deep); }, "nested deeper than 8 levels");

  w.set_u32("general.alignment", 24);
  expect_error_with([&] { w.write(test::scratch_path("bad-alignment.gguf")); }, "power of two");
  w.set_u32("general.alignment", 32);
  const std::string nowhere = test::scratch_path("no-such-dir") + "/x.gguf";
  expect_error_with([&] { w.write(nowhere); }, nowhere + ": cannot create");
}

// Declared tensors written through a stream, in any order, give the bytes write() gives for
// the same tensors; each mistake in using the stream is named.
TEST(GgufWriter, StreamWritesWhatWriteWrites) {
  const std::vector<float> a = random_values(40, 1.0f), c = random_values(64, 2.0f);
  const std::vector<std::byte> b = encode_tensor(GgmlType::Q8_0, random_values(64, 1.0f));
  GgufWriter whole, streamed;
  for (GgufWriter* w : {&whole, &streamed}) {
    w->set_u32("general.alignment", 64);
    w->set_string("general.name", "stream");
  }
  whole.add_tensor("a", {40}, a);
  whole.add_tensor("b", {32, 2}, GgmlType::Q8_0, b);
  whole.add_tensor("c", {64}, c);
  streamed.declare_tensor("a", {40}, GgmlType::F32);
  streamed.add_tensor("b", {32, 2}, GgmlType::Q8_0, b);
  streamed.declare_tensor("c", {64}, GgmlType::F32);
  const std::string want = test::scratch_path("whole.gguf"), got = test::scratch_path("streamed.gguf");
  whole.write(want);
  expect_error_with([&] { streamed.write(got); }, "tensor 'a' is declared: write it with open_stream");
  GgufTensorStream stream = streamed.open_stream(got);
  stream.write("c", std::as_bytes(std::span(c)));
  expect_error_with([&] { stream.write("c", std::as_bytes(std::span(c))); }, "tensor 'c': written twice");
  expect_error_with([&] { stream.write("b", b); }, "tensor 'b': not declared");
  expect_error_with([&] { stream.write("a", std::as_bytes(std::span(c))); }, "'a': 256 bytes of data, declared 160");
  expect_error_with([&] { stream.finish(); }, "tensor 'a' was declared but never written");
  stream.write("a", std::as_bytes(std::span(a)));
  stream.finish();
  EXPECT_EQ(read_file(got), read_file(want));
  expect_error_with([&] { stream.write("a", std::as_bytes(std::span(a))); }, "the stream is finished");
}

}  // namespace
}  // namespace pagoda
