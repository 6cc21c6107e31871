#pragma once
// A weight matrix as the model file encodes it: a typed view into the memory-mapped file (or
// into a buffer the Model owns), never a decoded copy. Kernels read its rows in place; the
// oracle and the packing step dequantize them.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/gguf/ggml_types.h"

namespace pagoda {

struct WeightTensor {
  GgmlType type = GgmlType::F32;
  const std::byte* data = nullptr;  // rows * row_bytes() bytes, row-major
  int64_t rows = 0;                 // output features
  int64_t cols = 0;                 // input features (contiguous)
  bool mapped = false;              // data lies in a read-only, private file mapping

  bool empty() const { return data == nullptr; }
  // Bytes of one row; rows hold whole blocks (the loaders check that).
  uint64_t row_bytes() const { return ggml_type_bytes(type, uint64_t(cols)); }
  uint64_t n_bytes() const { return uint64_t(rows) * row_bytes(); }
  std::span<const std::byte> row(int64_t r) const;

  // Decodes rows [first, first + count) into `out` (count * cols floats).
  void dequantize_rows(int64_t first, int64_t count, float* out) const;
  void dequantize_row(int64_t r, float* out) const { dequantize_rows(r, 1, out); }
  // The whole matrix in f32, [rows][cols].
  std::vector<float> to_f32() const;

  // Once a copy has replaced these bytes (a matrix repacked for the kernels), drops the pages
  // of the mapping they occupy from the process (MADV_DONTNEED on the whole pages inside the
  // range), so the model is not resident twice. The bytes stay readable: a later read faults
  // them in again from the file. Does nothing unless `mapped`.
  void release_pages() const { release_pages(data, n_bytes()); }
  // The same for `bytes` bytes from `begin`, a range inside this tensor's data.
  void release_pages(const void* begin, std::size_t bytes) const;
  // As release_pages, for bytes that nobody will read again: a file read into memory
  // (MappedFile::Load::Copy) has its pages freed too, and they then read as zeros.
  void discard_pages(const void* begin, std::size_t bytes) const;
};

}  // namespace pagoda
