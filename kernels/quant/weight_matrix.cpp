#include "kernels/quant/weight_matrix.h"

#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <string>

#include "kernels/quant/activations.h"
#include "kernels/quant/half_dot.h"
#include "kernels/quant/interleaved.h"
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
    case QuantType::F32:
    case QuantType::F16:
    case QuantType::BF16:
    case QuantType::Q4_0:
    case QuantType::Q4_1:
    case QuantType::Q5_0:
    case QuantType::Q5_1:
    case QuantType::Q8_0:
    case QuantType::Q4_K:
    case QuantType::Q5_K:
    case QuantType::Q6_K:
    case QuantType::Q2_K:
    case QuantType::Q3_K:
    case QuantType::IQ4_NL:
    case QuantType::IQ4_XS: return true;
    default: return false;
  }
}

std::string type_name(QuantType type) {
  const char* name = ggml_type_id_name(uint32_t(type));
  return name ? name : std::to_string(uint32_t(type));
}

// Each activation row quantized once, by itself, in the encoding `format` takes (none for F32).
class Activations {
 public:
  Activations(quant::ActFormat format, const float* A, int M, int lda, int K, Isa isa = Isa::Portable)
      : bytes_(quant::act_row_bytes(format, K)), A_(A), lda_(lda) {
    if (bytes_ == 0) return;
    data_.reset(new std::byte[bytes_ * M]);
    auto quantize = [&](int m0, int m1) {
      for (int m = m0; m < m1; ++m)
        quant::quantize_act_row(format, A + std::size_t(m) * lda, K, data_.get() + bytes_ * m, isa);
    };
    if (double(M) * K < kParallelWork) quantize(0, M);
    else tbb::parallel_for(tbb::blocked_range<int>(0, M, 8), [&](const auto& r) { quantize(r.begin(), r.end()); });
  }
  const void* row(int m) const {
    return bytes_ > 0 ? static_cast<const void*>(data_.get() + bytes_ * m) : A_ + std::size_t(m) * lda_;
  }
  std::size_t stride() const { return bytes_ > 0 ? bytes_ : std::size_t(lda_) * sizeof(float); }

 private:
  std::size_t bytes_;
  const float* A_;
  int lda_;
  std::unique_ptr<std::byte[]> data_;
};

// Runs body(m_begin, m_end, t_begin, t_end) over M activation rows × `tiles` weight tiles: on
// this thread when small, split statically over the weight tiles for decode's few rows (each
// thread streams its own share of the weights), else over both.
template <typename Body>
void split(int M, int tiles, double work, const Body& body) {
  if (work < kParallelWork) {
    body(0, M, 0, tiles);
  } else if (M <= kGemvRows) {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, tiles), [&](const auto& r) { body(0, M, r.begin(), r.end()); },
        tbb::static_partitioner());
  } else {
    tbb::parallel_for(tbb::blocked_range2d<int>(0, M, kTaskRows, 0, tiles, 1),
                      [&](const auto& r) { body(r.rows().begin(), r.rows().end(), r.cols().begin(), r.cols().end()); });
  }
}

void store(float* C, int ldc, int m, int n, float v, bool accumulate) {
  float& c = C[std::size_t(m) * ldc + n];
  c = accumulate ? c + v : v;
}

// Quantized parts: 16-row groups of the repacked tiles (interleaved.h), a few activation rows
// per call; every call gives each output the same bits.
void run_interleaved(const float* A, int M, int lda, const WeightMatrix& W, const WeightMatrix::Part& part, float* C,
                     int ldc, bool accumulate) {
  const int K = W.cols();
  const quant::GroupKernels& kernels = quant::group_kernels(W.isa());
  const quant::GroupFn group = quant::group_for(kernels, part.type);
  const Activations act(quant::act_format(part.type), A, M, lda, K, W.isa());
  const int blocks = K / block_shape(part.type).elements;
  const std::size_t group_bytes = quant::tile_bytes(part.type) * std::size_t(blocks);
  const int N = part.rows, groups = (N + quant::kGroupRows - 1) / quant::kGroupRows;
  split(M, groups, double(M) * N * K, [&](int m_begin, int m_end, int g_begin, int g_end) {
    float out[quant::kGroupRows * 4];
    for (int g = g_begin; g < g_end; ++g) {
      const int n0 = g * quant::kGroupRows, rows = std::min(quant::kGroupRows, N - n0);
      for (int m = m_begin; m < m_end; m += kernels.max_acts) {
        const int na = std::min(kernels.max_acts, m_end - m);
        group(part.tiles.get() + group_bytes * g, blocks, static_cast<const uint8_t*>(act.row(m)), act.stride(), na,
              m == m_begin, out);
        for (int j = 0; j < na; ++j)
          for (int r = 0; r < rows; ++r)
            store(C, ldc, m + j, part.first_row + n0 + r, out[quant::kGroupRows * j + r], accumulate);
      }
    }
  });
}

// F16 / BF16 parts, read in place: rows dotted with f32 activation rows (half_dot.h).
void run_half(const float* A, int M, int lda, const WeightMatrix& W, const WeightMatrix::Part& part, float* C, int ldc,
              bool accumulate) {
  const int K = W.cols();
  const quant::TypeKernels dot = quant::dot_for(quant::dot_kernels(W.isa()), part.type);
  const Activations act(quant::ActFormat::F32, A, M, lda, K);
  const int N = part.rows;
  const int tiles = (N + kTileRows - 1) / kTileRows;
  auto weight_row = [&](int n) { return part.data + part.row_bytes * n; };
  auto put = [&](int m, int n, float v) { store(C, ldc, m, part.first_row + n, v, accumulate); };
  // Four weight rows against up to four activation rows share each load; leftovers one by one.
  split(M, tiles, double(M) * N * K, [&](int m_begin, int m_end, int t_begin, int t_end) {
    for (int t = t_begin; t < t_end; ++t) {
      const int n0 = t * kTileRows, n1 = std::min(N, n0 + kTileRows);
      for (int m = m_begin; m < m_end; m += 4) {
        const int na = std::min(4, m_end - m);
        int n = n0;
        for (; n + 4 <= n1 && dot.rows4; n += 4) {
          float v[16];
          dot.rows4(weight_row(n), part.row_bytes, act.row(m), act.stride(), na, K, v);
          for (int r = 0; r < na; ++r)
            for (int i = 0; i < 4; ++i) put(m + r, n + i, v[4 * r + i]);
        }
        for (; n < n1; ++n) {
          if (na == 4) {
            float v[4];
            dot.dot4(weight_row(n), act.row(m), act.stride(), K, v);
            for (int r = 0; r < 4; ++r) put(m + r, n, v[r]);
          } else {
            for (int r = 0; r < na; ++r) put(m + r, n, dot.dot(weight_row(n), act.row(m + r), K));
          }
        }
      }
    }
  });
}

void run(const float* A, int M, int lda, const WeightMatrix& W, float* C, int ldc, bool accumulate) {
  if (M <= 0) return;
  for (const WeightMatrix::Part& part : W.parts()) {
    if (part.type == QuantType::F32) {
      if (accumulate) matmul_accumulate(A, M, lda, part.packed, C + part.first_row, ldc);
      else matmul(A, M, lda, part.packed, C + part.first_row, ldc);
    } else if (W.cols() == 0) {
      for (int m = 0; m < M && !accumulate; ++m)
        std::fill_n(C + std::size_t(m) * ldc + part.first_row, part.rows, 0.0f);
    } else if (quant::interleaved(part.type)) {
      run_interleaved(A, M, lda, W, part, C, ldc, accumulate);
    } else {
      run_half(A, M, lda, W, part, C, ldc, accumulate);
    }
  }
}

}  // namespace

bool copied_at_make(QuantType type) { return type == QuantType::F32 || quant::interleaved(type); }

WeightMatrix WeightMatrix::make(std::span<const WeightPart> parts, int cols) { return make(parts, cols, active_isa()); }

WeightMatrix WeightMatrix::make(std::span<const WeightPart> parts, int cols, Isa isa) {
  if (!cpu_supports(isa))
    throw Error(std::string("cannot build a weight matrix for ") + isa_name(isa) + ": this CPU lacks it");
  if (cols < 0) throw Error("weight matrix: negative column count " + std::to_string(cols));
  WeightMatrix w;
  w.isa_ = isa;
  w.cols_ = cols;
  for (const WeightPart& p : parts) {
    if (!readable(p.type)) throw Error("weight matrix: cannot compute with " + type_name(p.type) + " weights");
    const BlockShape shape = block_shape(p.type);
    if (cols % shape.elements != 0)
      throw Error("weight matrix: " + type_name(p.type) + " rows must be a multiple of " +
                  std::to_string(shape.elements) + " values, not " + std::to_string(cols));
    if (p.rows < 0) throw Error("weight matrix: negative row count " + std::to_string(p.rows));
  }
  for (std::size_t i = 0; i < parts.size();) {
    const WeightPart& p = parts[i];
    Part part{
        p.type, nullptr, p.rows, w.rows_, std::size_t(cols / block_shape(p.type).elements) * block_shape(p.type).bytes,
        {}};
    if (p.type == QuantType::F32) {
      // Consecutive F32 parts become one packed matrix, so they stay one GEMM.
      std::size_t end = i + 1;
      while (end < parts.size() && parts[end].type == QuantType::F32) part.rows += parts[end++].rows;
      if (end == i + 1) {
        part.packed = PackedMatrix::pack(static_cast<const float*>(p.data), p.rows, cols, isa, p.consumed);
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
    } else if (quant::interleaved(p.type)) {
      part.tiles = quant::repack(p.type, static_cast<const uint8_t*>(p.data), part.row_bytes, p.rows, cols, p.consumed);
      ++i;
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
