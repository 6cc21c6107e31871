#include "kernels/quant/weight_matrix.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <string>

#include "kernels/quant/quant_dot.h"
#include "pagoda/error.h"

namespace pagoda::kernels {

namespace {

// Weight rows per tile: a tile's rows stay in L1/L2 while every activation row of the task
// passes them, so the weights are streamed from memory once per call whatever M is.
constexpr int kTileRows = 8;
// Activation rows per task at most, so a task's quantized activations stay in L2.
constexpr int kTaskRows = 64;
// Up to this many activation rows a call is decode's GEMV: bandwidth-bound, split statically.
constexpr int kGemvRows = 4;
// Below this many multiply-adds waking other threads costs more than it saves.
constexpr double kParallelWork = 1 << 17;

bool readable(QuantType type) {
  switch (type) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q4_0: case QuantType::Q4_1:
    case QuantType::Q5_0: case QuantType::Q5_1: case QuantType::Q8_0: case QuantType::Q4_K: case QuantType::Q5_K:
    case QuantType::Q6_K:
      return true;
    default:
      return false;
  }
}

std::string type_name(QuantType type) {
  const char* name = ggml_type_id_name(uint32_t(type));
  return name ? name : std::to_string(uint32_t(type));
}

void run_quantized(const float* A, int M, int lda, const WeightMatrix& W, const WeightMatrix::Part& part, float* C,
                   int ldc, bool accumulate) {
  const int K = W.cols();
  const quant::TypeKernels dot = quant::dot_for(quant::dot_kernels(W.isa()), part.type);
  const quant::ActFormat format = quant::act_format(part.type);
  // Each activation row quantized once, by itself.
  const std::size_t act_bytes = quant::act_row_bytes(format, K);
  std::unique_ptr<std::byte[]> act;
  if (act_bytes > 0) {
    act.reset(new std::byte[act_bytes * M]);
    auto quantize = [&](int m0, int m1) {
      for (int m = m0; m < m1; ++m) quant::quantize_act_row(format, A + std::size_t(m) * lda, K, act.get() + act_bytes * m);
    };
    if (double(M) * K < kParallelWork) quantize(0, M);
    else tbb::parallel_for(tbb::blocked_range<int>(0, M, 8), [&](const auto& r) { quantize(r.begin(), r.end()); });
  }
  auto act_row = [&](int m) -> const void* {
    return act_bytes > 0 ? static_cast<const void*>(act.get() + act_bytes * m) : A + std::size_t(m) * lda;
  };
  const std::size_t act_stride = act_bytes > 0 ? act_bytes : std::size_t(lda) * sizeof(float);
  const int N = part.rows;
  const int tiles = (N + kTileRows - 1) / kTileRows;
  auto store = [&](int m, int n, float v) {
    float& c = C[std::size_t(m) * ldc + part.first_row + n];
    c = accumulate ? c + v : v;
  };
  auto one_by_one = [&](int m, int n) { store(m, n, dot.dot(part.data + part.row_bytes * n, act_row(m), K)); };
  // Every path below gives each output the same bits (quant_dot.h): they differ only in how
  // many weight and activation rows share one pass over the weights.
  auto run_tiles = [&](int m_begin, int m_end, int t_begin, int t_end) {
    for (int t = t_begin; t < t_end; ++t) {
      const int n0 = t * kTileRows, n1 = std::min(N, n0 + kTileRows);
      int m = m_begin;
      if (dot.rows4) {
        for (; m < m_end; m += 4) {
          const int na = std::min(4, m_end - m);
          int n = n0;
          for (; n + 4 <= n1; n += 4) {
            float v[16];
            dot.rows4(part.data + part.row_bytes * n, part.row_bytes, act_row(m), act_stride, na, K, v);
            for (int r = 0; r < na; ++r)
              for (int i = 0; i < 4; ++i) store(m + r, n + i, v[4 * r + i]);
          }
          for (; n < n1; ++n)
            for (int r = 0; r < na; ++r) one_by_one(m + r, n);
        }
        continue;
      }
      // Four activation rows at a time share each weight row's decoding; the rest one by one.
      for (; m + 4 <= m_end; m += 4)
        for (int n = n0; n < n1; ++n) {
          float v[4];
          dot.dot4(part.data + part.row_bytes * n, act_row(m), act_stride, K, v);
          for (int r = 0; r < 4; ++r) store(m + r, n, v[r]);
        }
      for (; m < m_end; ++m)
        for (int n = n0; n < n1; ++n) one_by_one(m, n);
    }
  };
  if (double(M) * N * K < kParallelWork) {
    run_tiles(0, M, 0, tiles);
  } else if (M <= kGemvRows) {
    // Decode: one contiguous share of the weight rows per thread, no work stealing to balance.
    tbb::parallel_for(tbb::blocked_range<int>(0, tiles), [&](const auto& r) { run_tiles(0, M, r.begin(), r.end()); },
                      tbb::static_partitioner());
  } else {
    tbb::parallel_for(tbb::blocked_range2d<int>(0, M, kTaskRows, 0, tiles, 1), [&](const auto& r) {
      run_tiles(r.rows().begin(), r.rows().end(), r.cols().begin(), r.cols().end());
    });
  }
}

void run(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc, bool accumulate) {
  if (M <= 0) return;
  for (const WeightMatrix::Part& part : W.parts()) {
    if (part.type == QuantType::F32) {
      if (accumulate) matmul_accumulate(A, M, lda, part.packed, C + part.first_row, ldc);
      else matmul(A, M, lda, part.packed, C + part.first_row, ldc);
    } else if (W.cols() == 0) {
      for (int m = 0; m < M && !accumulate; ++m) std::fill_n(C + std::size_t(m) * ldc + part.first_row, part.rows, 0.0f);
    } else {
      run_quantized(A, M, lda, W, part, C, ldc, accumulate);
    }
  }
}

}  // namespace

WeightMatrix WeightMatrix::make(std::span<const WeightPart> parts, int cols) { return make(parts, cols, active_isa()); }

WeightMatrix WeightMatrix::make(std::span<const WeightPart> parts, int cols, Isa isa) {
  if (!cpu_supports(isa)) throw Error(std::string("cannot build a weight matrix for ") + isa_name(isa) + ": this CPU lacks it");
  if (cols < 0) throw Error("weight matrix: negative column count " + std::to_string(cols));
  WeightMatrix w;
  w.isa_ = isa;
  w.cols_ = cols;
  for (const WeightPart& p : parts) {
    if (!readable(p.type)) throw Error("weight matrix: cannot compute with " + type_name(p.type) + " weights");
    const BlockShape shape = block_shape(p.type);
    if (cols % shape.elements != 0)
      throw Error("weight matrix: " + type_name(p.type) + " rows must be a multiple of " + std::to_string(shape.elements) +
                  " values, not " + std::to_string(cols));
    if (p.rows < 0) throw Error("weight matrix: negative row count " + std::to_string(p.rows));
  }
  for (std::size_t i = 0; i < parts.size();) {
    const WeightPart& p = parts[i];
    Part part{p.type, nullptr, p.rows, w.rows_, std::size_t(cols / block_shape(p.type).elements) * block_shape(p.type).bytes, {}};
    if (p.type == QuantType::F32) {
      // Consecutive F32 parts become one packed matrix, so they stay one GEMM.
      std::size_t end = i + 1;
      while (end < parts.size() && parts[end].type == QuantType::F32) part.rows += parts[end++].rows;
      if (end == i + 1) {
        part.packed = PackedMatrix::pack(static_cast<const float*>(p.data), p.rows, cols, isa);
      } else {
        std::vector<float> stacked;
        stacked.reserve(std::size_t(part.rows) * cols);
        for (std::size_t j = i; j < end; ++j) {
          const auto* data = static_cast<const float*>(parts[j].data);
          stacked.insert(stacked.end(), data, data + std::size_t(parts[j].rows) * cols);
        }
        part.packed = PackedMatrix::pack(stacked.data(), part.rows, cols, isa);
      }
      i = end;
    } else {
      part.data = static_cast<const uint8_t*>(p.data);
      ++i;
    }
    w.rows_ += part.rows;
    w.parts_.push_back(std::move(part));
  }
  return w;
}

void matmul(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc) {
  run(A, M, lda, W, C, ldc, false);
}

void matmul_accumulate(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc) {
  run(A, M, lda, W, C, ldc, true);
}

}  // namespace pagoda::kernels
