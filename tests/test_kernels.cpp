// Kernel tests, run for every ISA this CPU supports: accuracy against double-precision naive
// references, and the bitwise invariances the engine's batch invariance rests on.

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/ops.h"
#include "kernels/rope.h"
#include "support/kernel_support.h"

namespace {

using namespace pagoda::kernels;
using pagoda::test::random_uniform;
using pagoda::test::supported_isas;

bool bitwise_equal(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Runs every test once per supported ISA, switching the kernel tables with set_isa().
class KernelTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { ASSERT_TRUE(set_isa(GetParam())); }
  void TearDown() override { set_isa(detected_isa()); }
};

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelTest, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(CpuFeatures, ActiveIsaIsSupportedAndNamed) {
  EXPECT_TRUE(cpu_supports(Isa::Portable));
  EXPECT_TRUE(cpu_supports(active_isa()));
  EXPECT_TRUE(cpu_supports(detected_isa()));
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    EXPECT_EQ(set_isa(isa), cpu_supports(isa));
    if (cpu_supports(isa)) {
      EXPECT_EQ(active_isa(), isa);
    }
  }
  set_isa(detected_isa());
}

TEST(CpuFeatures, PackingForAMissingIsaThrows) {
  const std::vector<float> w(4, 1.0f);
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) {
      EXPECT_ANY_THROW(PackedMatrix::pack(w.data(), 2, 2, isa));
    }
  }
}

// ---- GEMM ----

void reference_matmul(const std::vector<float>& a, int M, int K, const std::vector<float>& w, int N,
                      std::vector<double>& c, std::vector<double>& magnitude) {
  c.assign(std::size_t(M) * N, 0.0);
  magnitude.assign(c.size(), 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = 0.0, abs_sum = 0.0;
      for (int k = 0; k < K; ++k) {
        const double p = double(a[std::size_t(m) * K + k]) * double(w[std::size_t(n) * K + k]);
        sum += p;
        abs_sum += std::fabs(p);
      }
      c[std::size_t(m) * N + n] = sum;
      magnitude[std::size_t(m) * N + n] = abs_sum;
    }
}

TEST_P(KernelTest, MatmulMatchesDoubleReference) {
  const int sizes[] = {1, 3, 17, 31, 33, 65, 100, 288};
  struct Shape {
    int M, N, K;
  };
  std::vector<Shape> shapes;
  for (int M : sizes)
    for (int N : {1, 17, 33, 100, 288})
      for (int K : {1, 3, 31, 65, 288}) shapes.push_back({M, N, K});
  shapes.push_back({7, 768, 768});
  shapes.push_back({64, 2048, 768});
  shapes.push_back({33, 768, 2048});
  unsigned seed = 10;
  for (const Shape& s : shapes) {
    const auto a = random_uniform(std::size_t(s.M) * s.K, ++seed);
    const auto w = random_uniform(std::size_t(s.N) * s.K, ++seed);
    const PackedMatrix packed = PackedMatrix::pack(w.data(), s.N, s.K);
    ASSERT_EQ(packed.isa(), GetParam());
    ASSERT_EQ(packed.rows(), s.N);
    ASSERT_EQ(packed.cols(), s.K);
    std::vector<float> c(std::size_t(s.M) * s.N, NAN);
    matmul(a.data(), s.M, s.K, packed, c.data(), s.N);
    std::vector<double> ref, magnitude;
    reference_matmul(a, s.M, s.K, w, s.N, ref, magnitude);
    // fp32 accumulation error is bounded by ~K ulps of the sum of |products|.
    const double bound_per_k = 2.0 * 1.2e-7;
    for (std::size_t i = 0; i < c.size(); ++i)
      ASSERT_NEAR(c[i], ref[i], bound_per_k * s.K * magnitude[i] + 1e-30)
          << "M=" << s.M << " N=" << s.N << " K=" << s.K << " at " << i;
  }
}

TEST_P(KernelTest, MatmulHonoursStridesAndAccumulates) {
  const int M = 19, N = 50, K = 70, lda = 81, ldc = 64;
  const auto a = random_uniform(std::size_t(M) * lda, 1);
  const auto w = random_uniform(std::size_t(N) * K, 2);
  const auto c0 = random_uniform(std::size_t(M) * ldc, 3);
  const PackedMatrix packed = PackedMatrix::pack(w.data(), N, K);
  std::vector<float> c = c0;
  matmul_accumulate(a.data(), M, lda, packed, c.data(), ldc);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < ldc; ++n) {
      const float got = c[std::size_t(m) * ldc + n];
      if (n >= N) {  // padding columns of C are untouched
        ASSERT_EQ(got, c0[std::size_t(m) * ldc + n]);
        continue;
      }
      double ref = c0[std::size_t(m) * ldc + n];
      for (int k = 0; k < K; ++k) ref += double(a[std::size_t(m) * lda + k]) * w[std::size_t(n) * K + k];
      ASSERT_NEAR(got, ref, 1e-4) << m << "," << n;
    }
}

TEST_P(KernelTest, MatmulRowsAreBatchInvariant) {
  const int N = 100, K = 300, rows = 300;
  const auto w = random_uniform(std::size_t(N) * K, 4);
  const auto a = random_uniform(std::size_t(rows) * K, 5);
  const PackedMatrix packed = PackedMatrix::pack(w.data(), N, K);

  // Row 0 of `block` is the probe row; matmul over M rows starting there, in an arena.
  auto run = [&](const float* block, int M, int threads) {
    std::vector<float> c(std::size_t(M) * N);
    tbb::task_arena(threads).execute([&] { matmul(block, M, K, packed, c.data(), N); });
    return c;
  };
  for (int probe : {0, 5, 6, 63, 250}) {
    const float* row = a.data() + std::size_t(probe) * K;
    const std::vector<float> alone = run(row, 1, 1);
    for (int M : {7, 64, 300}) {
      // The probe row at every offset an M-row batch can put it.
      for (int offset : {0, 1, 3, 6, M - 1}) {
        if (offset >= M || probe - offset < 0 || probe - offset + M > rows) continue;
        const float* block = a.data() + std::size_t(probe - offset) * K;
        for (int threads : {1, 2}) {
          const std::vector<float> c = run(block, M, threads);
          ASSERT_TRUE(bitwise_equal(alone.data(), c.data() + std::size_t(offset) * N, N))
              << "probe " << probe << " M=" << M << " offset " << offset << " threads " << threads;
        }
      }
    }
  }
}

TEST_P(KernelTest, MatmulColumnsAreIndependentOfN) {
  // Output column n is the same whether W has 40 rows or only the first 17.
  const int K = 129, M = 9;
  const auto w = random_uniform(std::size_t(40) * K, 6);
  const auto a = random_uniform(std::size_t(M) * K, 7);
  const PackedMatrix full = PackedMatrix::pack(w.data(), 40, K);
  const PackedMatrix part = PackedMatrix::pack(w.data(), 17, K);
  std::vector<float> c_full(std::size_t(M) * 40), c_part(std::size_t(M) * 17);
  matmul(a.data(), M, K, full, c_full.data(), 40);
  matmul(a.data(), M, K, part, c_part.data(), 17);
  for (int m = 0; m < M; ++m) ASSERT_TRUE(bitwise_equal(c_full.data() + m * 40, c_part.data() + m * 17, 17)) << m;
}

TEST(Matmul, UsesTheKernelOfThePackedIsa) {
  const int M = 5, N = 70, K = 90;
  const auto w = random_uniform(std::size_t(N) * K, 8);
  const auto a = random_uniform(std::size_t(M) * K, 9);
  for (Isa packed_for : supported_isas()) {
    const PackedMatrix packed = PackedMatrix::pack(w.data(), N, K, packed_for);
    std::vector<float> expected(std::size_t(M) * N), got(expected.size());
    set_isa(packed_for);
    matmul(a.data(), M, K, packed, expected.data(), N);
    for (Isa active : supported_isas()) {
      set_isa(active);
      matmul(a.data(), M, K, packed, got.data(), N);
      EXPECT_TRUE(bitwise_equal(expected.data(), got.data(), got.size()))
          << isa_name(packed_for) << " under " << isa_name(active);
    }
  }
  set_isa(detected_isa());
}

// ---- Row ops ----

TEST_P(KernelTest, RmsnormMatchesReference) {
  for (int n : {1, 7, 16, 33, 288, 768}) {
    const auto x = random_uniform(n, n, -3.0f, 3.0f);
    const auto w = random_uniform(n, n + 1);
    std::vector<float> out(n);
    rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
    double ss = 0.0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) ASSERT_NEAR(out[i], w[i] * x[i] * inv, 1e-5 * std::fabs(w[i] * x[i] * inv) + 1e-7);
  }
}

TEST_P(KernelTest, RmsnormRowsEqualsSingleRows) {
  const int rows = 37, n = 100, ld = 104;
  const auto x = random_uniform(std::size_t(rows) * ld, 8);
  const auto w = random_uniform(n, 9);
  std::vector<float> batched(std::size_t(rows) * ld, 0.0f), single(n);
  rmsnorm_rows(x.data(), ld, w.data(), batched.data(), ld, rows, n, 1e-6f);
  for (int r = 0; r < rows; ++r) {
    rmsnorm(x.data() + r * ld, w.data(), single.data(), n, 1e-6f);
    ASSERT_TRUE(bitwise_equal(single.data(), batched.data() + r * ld, n)) << r;
  }
}

TEST_P(KernelTest, SwigluMatchesReference) {
  for (int n : {1, 5, 16, 17, 2048}) {
    auto gate = random_uniform(n, 10 + n, -20.0f, 20.0f);
    if (n > 4) gate[0] = -100.0f, gate[1] = 100.0f, gate[2] = 0.0f, gate[3] = -90.0f;
    const auto up = random_uniform(n, 11 + n);
    std::vector<float> out(n);
    swiglu(gate.data(), up.data(), out.data(), n);
    for (int i = 0; i < n; ++i) {
      const double g = gate[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], ref, 3e-7 * std::fabs(ref) + 1e-30) << "n=" << n << " i=" << i << " g=" << g;
    }
  }
}

TEST_P(KernelTest, SwigluMatchesPortableAlmostEverywhere) {
  // The SIMD exp is evaluated in double and rounded once; glibc's expf is within 0.502 ulp, so
  // the two should agree on nearly every input, and never by more than an ulp or two.
  const int n = 100000;
  const auto gate = random_uniform(n, 12, -30.0f, 30.0f);
  const auto up = random_uniform(n, 13);
  std::vector<float> out(n), portable(n);
  swiglu(gate.data(), up.data(), out.data(), n);
  set_isa(Isa::Portable);
  swiglu(gate.data(), up.data(), portable.data(), n);
  int differ = 0;
  for (int i = 0; i < n; ++i) {
    if (out[i] == portable[i]) continue;
    ++differ;
    ASSERT_LE(std::fabs(out[i] - portable[i]), 4 * std::fabs(std::nextafter(portable[i], 0.0f) - portable[i]))
        << gate[i];
  }
  EXPECT_LT(differ, n / 1000);
}

TEST_P(KernelTest, GeluMatchesTheTanhFormulaInPlaceOrNot) {
  for (int n : {1, 5, 16, 17, 3072}) {
    auto x = random_uniform(n, 20 + n, -12.0f, 12.0f);
    if (n > 4) x[0] = -100.0f, x[1] = 100.0f, x[2] = 0.0f, x[3] = -3e-8f;
    std::vector<float> out(n), in_place = x;
    gelu(x.data(), out.data(), n);
    gelu(in_place.data(), in_place.data(), n);
    ASSERT_TRUE(bitwise_equal(out.data(), in_place.data(), n));
    for (int i = 0; i < n; ++i) {
      const double v = x[i];
      const double u = 0.7978845608 * (v + 0.044715 * v * v * v);
      // 0.5·v·(1 + tanh(u)), written without its cancellation for very negative v.
      const double ref = v / (1.0 + std::exp(-2.0 * u));
      if (v > -5.0) {
        ASSERT_NEAR(ref, 0.5 * v * (1.0 + std::tanh(u)), 1e-12);
      }
      // exp's argument, 2u, is a float: its rounding moves the result by |2u| ulps relative, which
      // matters in the negative tail (the tanh form in float would lose those values entirely).
      ASSERT_NEAR(out[i], ref, 3e-7 * (1.0 + std::fabs(2.0 * u)) * std::fabs(ref) + 1e-30) << "n=" << n << " x=" << v;
    }
  }
}

TEST_P(KernelTest, SoftmaxMatchesReference) {
  for (int n : {1, 3, 16, 31, 1000, 32000}) {
    auto x = random_uniform(n, 14 + n, -10.0f, 10.0f);
    const auto in = x;
    softmax(x.data(), n);
    double max = in[0];
    for (float v : in) max = std::max<double>(max, v);
    double sum = 0.0;
    for (float v : in) sum += std::exp(v - max);
    // The float sum over n terms carries up to ~n·ulp relative error (sequential portable sum).
    const double tolerance = 1e-6 + 1e-9 * n;
    for (int i = 0; i < n; ++i) {
      const double ref = std::exp(in[i] - max) / sum;
      ASSERT_NEAR(x[i], ref, tolerance * ref + 1e-12) << "n=" << n << " i=" << i;
    }
  }
}

TEST(Ops, ArgmaxTakesFirstMaximum) {
  const std::vector<float> x = {1.0f, 5.0f, -2.0f, 5.0f, 4.0f};
  EXPECT_EQ(argmax(x.data(), 5), 1);
  EXPECT_EQ(argmax(x.data(), 1), 0);
  // Long rows go through the lanes: every position of the maximum, ties, and the tail.
  for (int n : {16, 17, 33, 32000}) {
    std::vector<float> values(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) values[size_t(i)] = float((i * 7919) % 1000) - 500.0f;
    for (int at : {0, n / 3, n - 1}) {
      std::vector<float> y = values;
      y[size_t(at)] = 1000.0f;
      EXPECT_EQ(argmax(y.data(), n), at) << "n " << n;
      y[size_t(n - 1)] = 1000.0f;
      EXPECT_EQ(argmax(y.data(), n), at) << "the first of two maxima, n " << n;
    }
  }
  const std::vector<float> low(40, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(argmax(low.data(), 40), 0);
}

// ---- RoPE ----

TEST(Rope, MatchesReferenceAndTable) {
  const int n_heads = 3, head_dim = 16;
  const float theta = 10000.0f;
  // Adjacent pairs (llama) and NEOX pairs (qwen2/qwen3), plain and with linear scaling and
  // Llama 3.1-style frequency factors.
  std::vector<float> factors(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) factors[size_t(i)] = 1.0f + 0.75f * float(i);
  for (RopeStyle style : {RopeStyle::Adjacent, RopeStyle::Neox}) {
    for (bool scaled : {false, true}) {
      SCOPED_TRACE(std::string(style == RopeStyle::Neox ? "neox" : "adjacent") + (scaled ? ", scaled" : ""));
      const RopeParams params{head_dim, theta, scaled ? 0.25f : 1.0f, scaled ? factors : std::vector<float>{}, style};
      const RopeTable table(64, params);
      for (int pos : {0, 1, 7, 63}) {
        const auto x = random_uniform(n_heads * head_dim, 20 + pos);
        auto direct = x, tabled = x;
        rope(direct.data(), n_heads, pos, params);
        table.apply(tabled.data(), n_heads, pos);
        ASSERT_TRUE(bitwise_equal(direct.data(), tabled.data(), x.size()));
        for (int h = 0; h < n_heads; ++h)
          for (int i = 0; i < head_dim / 2; ++i) {
            double angle = pos * std::pow(double(theta), -2.0 * i / head_dim);
            if (scaled) angle *= 0.25 / factors[size_t(i)];
            const int a = h * head_dim + (style == RopeStyle::Neox ? i : 2 * i);
            const int b = style == RopeStyle::Neox ? a + head_dim / 2 : a + 1;
            const double x0 = x[a], x1 = x[b];
            EXPECT_NEAR(direct[a], x0 * std::cos(angle) - x1 * std::sin(angle), 1e-6);
            EXPECT_NEAR(direct[b], x0 * std::sin(angle) + x1 * std::cos(angle), 1e-6);
          }
      }
    }
  }
}

// ---- Attention ----

// Keys and values for n_ctx positions, stored both contiguously and scattered over pages.
struct Cache {
  int head_dim, n_ctx, tokens_per_page;
  std::vector<float> k, v;  // [n_ctx][head_dim]
  std::vector<std::vector<float>> k_store, v_store;
  std::vector<const float*> k_pages, v_pages;

  Cache(int head_dim, int n_ctx, int tokens_per_page, unsigned seed)
      : head_dim(head_dim),
        n_ctx(n_ctx),
        tokens_per_page(tokens_per_page),
        k(random_uniform(std::size_t(n_ctx) * head_dim, seed, -2.0f, 2.0f)),
        v(random_uniform(std::size_t(n_ctx) * head_dim, seed + 1)) {
    const int pages = (n_ctx + tokens_per_page - 1) / tokens_per_page;
    for (int p = 0; p < pages; ++p) {
      // Garbage past n_ctx in the last page must not matter.
      k_store.push_back(random_uniform(std::size_t(tokens_per_page) * head_dim, seed + 100 + p, 50.0f, 60.0f));
      v_store.push_back(random_uniform(std::size_t(tokens_per_page) * head_dim, seed + 200 + p, 50.0f, 60.0f));
    }
    for (int t = 0; t < n_ctx; ++t)
      for (int d = 0; d < head_dim; ++d) {
        k_store[t / tokens_per_page][(t % tokens_per_page) * head_dim + d] = k[std::size_t(t) * head_dim + d];
        v_store[t / tokens_per_page][(t % tokens_per_page) * head_dim + d] = v[std::size_t(t) * head_dim + d];
      }
    for (int p = 0; p < pages; ++p) k_pages.push_back(k_store[p].data()), v_pages.push_back(v_store[p].data());
  }

  std::vector<float> attend(const std::vector<float>& q, int group, int ctx, float scale) const {
    std::vector<float> out(std::size_t(group) * head_dim, NAN);
    paged_attention(q.data(), group, head_dim, ctx, k_pages.data(), v_pages.data(), tokens_per_page, scale, out.data());
    return out;
  }
};

std::vector<double> reference_attention(const std::vector<float>& q, int group, const Cache& cache, int ctx,
                                        float scale) {
  const int hd = cache.head_dim;
  std::vector<double> out(std::size_t(group) * hd, 0.0);
  for (int g = 0; g < group; ++g) {
    std::vector<double> s(ctx);
    double max = -INFINITY;
    for (int t = 0; t < ctx; ++t) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += double(q[g * hd + d]) * cache.k[std::size_t(t) * hd + d];
      s[t] = scale * dot;
      max = std::max(max, s[t]);
    }
    double sum = 0.0;
    for (int t = 0; t < ctx; ++t) sum += s[t] = std::exp(s[t] - max);
    for (int t = 0; t < ctx; ++t)
      for (int d = 0; d < hd; ++d) out[g * hd + d] += s[t] / sum * cache.v[std::size_t(t) * hd + d];
  }
  return out;
}

TEST_P(KernelTest, PagedAttentionMatchesReference) {
  for (int head_dim : {8, 64, 72}) {
    for (int tokens_per_page : {1, 4, 16}) {
      for (int n_ctx : {1, 5, 16, 17, 200}) {
        const Cache cache(head_dim, n_ctx, tokens_per_page, 30 + n_ctx);
        for (int group : {1, 3, 10}) {
          const auto q = random_uniform(std::size_t(group) * head_dim, 40 + group, -2.0f, 2.0f);
          const float scale = 1.0f / std::sqrt(float(head_dim));
          const auto out = cache.attend(q, group, n_ctx, scale);
          const auto ref = reference_attention(q, group, cache, n_ctx, scale);
          for (std::size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out[i], ref[i], 2e-6) << "head_dim " << head_dim << " page " << tokens_per_page << " n_ctx "
                                              << n_ctx << " group " << group << " at " << i;
        }
      }
    }
  }
}

TEST_P(KernelTest, PagedAttentionIsDeterministicPerHead) {
  const int head_dim = 64, n_ctx = 200, group = 4;
  const Cache cache(head_dim, n_ctx, 16, 50);
  const auto q = random_uniform(std::size_t(group) * head_dim, 51);
  const auto out = cache.attend(q, group, n_ctx, 0.125f);
  EXPECT_TRUE(bitwise_equal(out.data(), cache.attend(q, group, n_ctx, 0.125f).data(), out.size()));
  // Each head alone, or placed anywhere in a group, gives the same bits.
  for (int g = 0; g < group; ++g) {
    const std::vector<float> alone_q(q.begin() + g * head_dim, q.begin() + (g + 1) * head_dim);
    const auto alone = cache.attend(alone_q, 1, n_ctx, 0.125f);
    EXPECT_TRUE(bitwise_equal(alone.data(), out.data() + g * head_dim, head_dim)) << g;
    std::vector<float> shifted(std::size_t(3) * head_dim, 0.5f);
    std::copy(alone_q.begin(), alone_q.end(), shifted.begin() + 2 * head_dim);
    const auto last = cache.attend(shifted, 3, n_ctx, 0.125f);
    EXPECT_TRUE(bitwise_equal(alone.data(), last.data() + 2 * head_dim, head_dim)) << g;
  }
}

TEST_P(KernelTest, AttentionIsIndependentOfPageSize) {
  // Not promised by the API, but blocks are aligned to positions, so it holds; the contiguous
  // variant relies on it to be an exact baseline.
  const int head_dim = 64, n_ctx = 77;
  const Cache paged(head_dim, n_ctx, 4, 60), other(head_dim, n_ctx, 16, 60);
  const auto q = random_uniform(std::size_t(2) * head_dim, 61);
  const auto a = paged.attend(q, 2, n_ctx, 0.125f);
  EXPECT_TRUE(bitwise_equal(a.data(), other.attend(q, 2, n_ctx, 0.125f).data(), a.size()));
  std::vector<float> contiguous(a.size());
  attention_contiguous(q.data(), 2, head_dim, n_ctx, paged.k.data(), paged.v.data(), 0.125f, contiguous.data());
  EXPECT_TRUE(bitwise_equal(a.data(), contiguous.data(), a.size()));
}

}  // namespace
