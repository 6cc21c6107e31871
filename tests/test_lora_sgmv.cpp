// The fused multi-adapter LoRA kernel (kernels/lora_sgmv), for every ISA this CPU supports and
// every element type of the factors (f32, f16, bf16): against a double-precision reference on
// awkward shapes and ranks, with mixed segments and rows without an adapter; bit for bit the
// same for a row alone, in a crowd, at any position in its segment, on one thread or two; and
// 16-bit factors bit for bit the same as f32 factors holding the same values.

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kernels/lora_sgmv.h"
#include "support/kernel_support.h"

namespace {

using namespace pagoda::kernels;
using pagoda::test::random_uniform;
using pagoda::test::supported_isas;

const char* element_name(LoraElement e) {
  switch (e) {
    case LoraElement::F32: return "f32";
    case LoraElement::F16: return "f16";
    case LoraElement::BF16: return "bf16";
  }
  return "?";
}

// Random values that `element` holds exactly, as an adapter file of that type would give.
std::vector<float> random_factor(std::size_t n, unsigned seed, LoraElement element) {
  std::vector<float> v = random_uniform(n, seed);
  for (float& x : v) {
    if (element == LoraElement::F16) x = f16_to_f32(f32_to_f16(x));
    if (element == LoraElement::BF16) x = bf16_to_f32(f32_to_bf16(x));
  }
  return v;
}

// An adapter's factors for one projection, with the plain A and B kept for the reference.
struct Adapter {
  int rank, n_in, n_out;
  float scale;
  std::vector<float> a, b;  // [rank][n_in], [n_out][rank]
  LoraFactorSet set;
  LoraFactors factors;  // set[0]

  Adapter(int rank_, int n_in_, int n_out_, float scale_, unsigned seed, LoraElement element = LoraElement::F32)
      : rank(rank_),
        n_in(n_in_),
        n_out(n_out_),
        scale(scale_),
        a(random_factor(std::size_t(rank) * n_in, seed, element)),
        b(random_factor(std::size_t(n_out) * rank, seed + 1000, element)),
        set(std::vector<LoraFactorSource>{{a.data(), b.data(), rank, n_in, n_out, scale, element}}),
        factors(set[0]) {}
};

// A batch: rows of x and y (with a row stride wider than the data), the rows that have an
// adapter grouped by adapter (`order`), and the segments over that order.
struct Batch {
  int rows, n_in, n_out, ldx, ldy;
  std::vector<float> x, y;
  std::vector<int> order;
  std::vector<LoraSegment> segments;

  // Appends a segment of the given batch rows on `factors`.
  void add(const std::vector<int>& batch_rows, const LoraFactors* factors) {
    const int begin = int(order.size());
    order.insert(order.end(), batch_rows.begin(), batch_rows.end());
    segments.push_back({begin, int(order.size()), factors});
  }
  void add_range(int begin, int end, const LoraFactors* factors) {
    std::vector<int> r;
    for (int m = begin; m < end; ++m) r.push_back(m);
    add(r, factors);
  }

  Batch(int rows_, int n_in_, int n_out_, unsigned seed)
      : rows(rows_),
        n_in(n_in_),
        n_out(n_out_),
        ldx(n_in_ + 3),
        ldy(n_out_ + 5),
        x(random_uniform(std::size_t(rows) * ldx, seed)),
        y(random_uniform(std::size_t(rows) * ldy, seed + 1)) {}

  std::vector<float> run(int threads = 2) const {
    std::vector<float> out = y;
    int max_rank = 1;
    for (const LoraSegment& s : segments)
      if (s.factors) max_rank = std::max(max_rank, s.factors->rank());
    std::vector<float> tmp(order.size() * std::size_t(max_rank + 1), NAN);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      lora_sgmv(x.data(), ldx, order.data(), segments.data(), int(segments.size()), tmp.data(), max_rank + 1,
                out.data(), ldy);
    });
    return out;
  }
};

// y[m][n] + Σ_j (scale·Σ_k x·a)·b in double, and a bound on the float kernel's error.
void expect_matches_reference(const Batch& batch, const std::vector<const Adapter*>& adapter_of_row,
                              const std::vector<float>& got, const std::string& what) {
  for (int m = 0; m < batch.rows; ++m) {
    const Adapter* ad = adapter_of_row[std::size_t(m)];
    std::vector<double> t(ad ? std::size_t(ad->rank) : 0), t_mag(t.size());
    for (std::size_t j = 0; j < t.size(); ++j)
      for (int k = 0; k < batch.n_in; ++k) {
        const double p = double(batch.x[std::size_t(m) * batch.ldx + k]) * ad->a[j * ad->n_in + k];
        t[j] += p;
        t_mag[j] += std::fabs(p);
      }
    for (int n = 0; n < batch.ldy; ++n) {
      const std::size_t i = std::size_t(m) * batch.ldy + n;
      double want = batch.y[i], magnitude = std::fabs(want);
      if (ad && n < batch.n_out) {
        for (std::size_t j = 0; j < t.size(); ++j) {
          const double bs = double(ad->b[std::size_t(n) * ad->rank + j]) * ad->scale;
          want += t[j] * bs;
          magnitude += t_mag[j] * std::fabs(bs);
        }
      }
      ASSERT_NEAR(got[i], want, 1e-5 * magnitude + 1e-30)
          << what << ": row " << m << ", column " << n << (n >= batch.n_out ? " (outside the output)" : "");
    }
  }
}

class LoraSgmv : public ::testing::TestWithParam<std::tuple<Isa, LoraElement>> {
 protected:
  void SetUp() override { ASSERT_TRUE(set_isa(std::get<0>(GetParam()))); }
  void TearDown() override { set_isa(detected_isa()); }
  static LoraElement element() { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(AllIsas, LoraSgmv,
                         ::testing::Combine(::testing::ValuesIn(supported_isas()),
                                            ::testing::Values(LoraElement::F32, LoraElement::F16, LoraElement::BF16)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  element_name(std::get<1>(info.param));
                         });

// The same, for the 16-bit element types only.
class LoraSgmvSixteenBit : public LoraSgmv {};

INSTANTIATE_TEST_SUITE_P(AllIsas, LoraSgmvSixteenBit,
                         ::testing::Combine(::testing::ValuesIn(supported_isas()),
                                            ::testing::Values(LoraElement::F16, LoraElement::BF16)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  element_name(std::get<1>(info.param));
                         });

// One adapter over every row, for ranks 1, 3, 16 and 64 and widths off every vector length.
TEST_P(LoraSgmv, MatchesTheReferenceOnAwkwardShapes) {
  unsigned seed = 1;
  for (int rank : {1, 3, 16, 64})
    for (int n_in : {1, 7, 17, 100, 288})
      for (int n_out : {1, 9, 33, 70, 300})
        for (int rows : {1, 5}) {
          const Adapter ad(rank, n_in, n_out, 0.75f, seed++, element());
          Batch batch(rows, n_in, n_out, seed++);
          batch.add_range(0, rows, &ad.factors);
          expect_matches_reference(batch, std::vector<const Adapter*>(std::size_t(rows), &ad), batch.run(),
                                   "rank " + std::to_string(rank) + ", " + std::to_string(n_in) + " → " +
                                       std::to_string(n_out) + ", " + std::to_string(rows) + " rows");
        }
}

// Segments of several adapters and ranks, rows with no adapter between and around them, an
// adapter whose rows are scattered over the batch, and a segment whose adapter leaves this
// projection alone (null factors): each row gets its own adapter's delta, the others stay as
// they were, bit for bit.
TEST_P(LoraSgmv, MixedSegmentsEachRowItsOwnAdapter) {
  const int n_in = 150, n_out = 97, rows = 40;
  std::vector<Adapter> adapters;
  adapters.reserve(4);
  for (int i = 0; i < 4; ++i)
    adapters.emplace_back(std::vector<int>{1, 3, 16, 64}[std::size_t(i)], n_in, n_out, 0.5f + 0.25f * float(i),
                          77 + 13 * unsigned(i), element());
  Batch batch(rows, n_in, n_out, 5);
  // rows: 0-1 none, 2-8 a0, 9-10 a3, 11 a1, 12-13 none, 14-22 a2, 23-25 null factors, 26-33 a3,
  // 34 a0, 35-39 none, and a1 also on the scattered rows 36, 12 and 1 (listed in that order).
  batch.add_range(2, 9, &adapters[0].factors);
  batch.add_range(9, 11, &adapters[3].factors);
  batch.add({11, 36, 12, 1}, &adapters[1].factors);
  batch.add_range(14, 23, &adapters[2].factors);
  batch.add_range(23, 26, nullptr);
  batch.add_range(26, 34, &adapters[3].factors);
  batch.add_range(34, 35, &adapters[0].factors);
  std::vector<const Adapter*> adapter_of_row(rows, nullptr);
  for (const LoraSegment& s : batch.segments)
    for (int p = s.begin; p < s.end; ++p)
      for (const Adapter& ad : adapters)
        if (&ad.factors == s.factors) adapter_of_row[std::size_t(batch.order[std::size_t(p)])] = &ad;
  const std::vector<float> got = batch.run();
  expect_matches_reference(batch, adapter_of_row, got, "mixed segments");
  for (int m = 0; m < rows; ++m)
    if (!adapter_of_row[std::size_t(m)]) {
      EXPECT_EQ(std::memcmp(got.data() + std::size_t(m) * batch.ldy, batch.y.data() + std::size_t(m) * batch.ldy,
                            std::size_t(batch.ldy) * sizeof(float)),
                0)
          << "row " << m << " has no adapter";
    }
}

// A row's output bits: alone; at each position of a same-adapter segment (so in each slot of
// the kernel's row groups); among many adapters and rows without one; on one thread or two.
TEST_P(LoraSgmv, RowIsBitIdenticalAloneInACrowdAndOnAnyThreadCount) {
  for (int rank : {3, 16, 64}) {
    const int n_in = 300, n_out = 200;
    std::vector<Adapter> adapters;
    adapters.reserve(8);
    for (int i = 0; i < 8; ++i) adapters.emplace_back(rank, n_in, n_out, 0.5f, 500 + unsigned(i), element());
    const Adapter& mine = adapters[2];

    Batch alone(1, n_in, n_out, 9);
    alone.add_range(0, 1, &mine.factors);
    const std::vector<float> want = alone.run(1);
    EXPECT_NE(std::memcmp(want.data(), alone.y.data(), sizeof(float) * std::size_t(n_out)), 0)
        << "the delta is not zero";

    auto expect_row = [&](const Batch& b, int row, const std::vector<float>& got, const std::string& what) {
      EXPECT_EQ(std::memcmp(got.data() + std::size_t(row) * b.ldy, want.data(), sizeof(float) * std::size_t(n_out)), 0)
          << what << ", rank " << rank;
    };
    auto with_row = [&](Batch& b, int row) {
      std::copy_n(alone.x.data(), n_in, b.x.data() + std::size_t(row) * b.ldx);
      std::copy_n(alone.y.data(), n_out, b.y.data() + std::size_t(row) * b.ldy);
    };

    // The same adapter over 9 rows, our row in every position.
    for (int pos = 0; pos < 9; ++pos) {
      Batch same(9, n_in, n_out, 100 + unsigned(pos));
      with_row(same, pos);
      same.add_range(0, 9, &mine.factors);
      for (int threads : {1, 2})
        expect_row(same, pos, same.run(threads), "one segment, position " + std::to_string(pos));
    }

    // A crowd of 67 rows: single-row segments of eight adapters, a long run of one, gaps.
    Batch crowd(67, n_in, n_out, 42);
    for (int m = 0; m < 40; ++m)
      if (m % 5 != 4) crowd.add_range(m, m + 1, &adapters[std::size_t(m % 8)].factors);
    crowd.add_range(41, 66, &mine.factors);
    for (int row : {2, 41, 43, 50, 65}) {
      Batch b = crowd;
      with_row(b, row);
      for (int threads : {1, 2}) expect_row(b, row, b.run(threads), "in a crowd at row " + std::to_string(row));
    }
    // The crowd grouped by adapter: row 2 shares its adapter's loads with rows 10, 18, ...
    Batch grouped = crowd;
    grouped.order.clear();
    grouped.segments.clear();
    for (int a = 0; a < 8; ++a) {
      std::vector<int> r;
      for (int m = a; m < 40; m += 8)
        if (m % 5 != 4) r.push_back(m);
      if (a == 2) r.insert(r.end(), {41, 50});
      grouped.add(r, &adapters[std::size_t(a)].factors);
    }
    for (int row : {2, 50}) {
      Batch b = grouped;
      with_row(b, row);
      for (int threads : {1, 2}) expect_row(b, row, b.run(threads), "grouped by adapter, row " + std::to_string(row));
    }
  }
}

// 16-bit factors widen exactly in registers, so a row's delta is the one f32 factors holding
// the same values give, bit for bit — awkward widths included (the tails load differently).
TEST_P(LoraSgmvSixteenBit, MatchesF32FactorsBitForBit) {
  unsigned seed = 300;
  for (int rank : {1, 5, 16})
    for (int n_in : {7, 40, 288})
      for (int n_out : {9, 70, 288}) {
        const Adapter narrow(rank, n_in, n_out, 0.625f, seed++, element());
        const LoraFactorSet wide_set(
            std::vector<LoraFactorSource>{{narrow.a.data(), narrow.b.data(), rank, n_in, n_out, 0.625f}});
        const LoraFactors& wide = wide_set[0];
        Batch with_narrow(6, n_in, n_out, seed++);
        Batch with_wide = with_narrow;
        with_narrow.add_range(0, 6, &narrow.factors);
        with_wide.add_range(0, 6, &wide);
        const std::vector<float> got = with_narrow.run(), want = with_wide.run();
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "rank " << rank << ", " << n_in << " → " << n_out;
      }
}

// Three projections of one x into column ranges of one output row (as Q, K and V share a row
// of the step's qkv buffer), in one call: each output bit for bit what its own call gives,
// whatever the other outputs' factors (another rank, none for a segment, another element type).
TEST_P(LoraSgmv, SeveralProjectionsInOneCallMatchOneCallEach) {
  const int n_in = 96, widths[3] = {64, 32, 40}, rows = 21, ldy = 64 + 32 + 40 + 3;
  const LoraElement other = element() == LoraElement::F32 ? LoraElement::F16 : LoraElement::F32;
  std::vector<Adapter> adapters;
  adapters.reserve(9);
  for (int o = 0; o < 3; ++o)
    for (int a = 0; a < 3; ++a)
      adapters.emplace_back(4 + 4 * a + o, n_in, widths[o], 0.5f + float(a), 900 + unsigned(3 * o + a),
                            a == 2 ? other : element());
  Batch batch(rows, n_in, ldy, 17);
  // Segments: rows 0-6 adapter 0, rows 9-12 and 2 more (scattered) adapter 1, rows 14-20 adapter 2.
  const std::vector<std::vector<int>> segment_rows = {
      {0, 1, 2, 3, 4, 5, 6}, {9, 10, 11, 12, 7}, {14, 15, 16, 17, 18, 19, 20}};
  std::vector<int> order;
  for (const auto& r : segment_rows) order.insert(order.end(), r.begin(), r.end());
  std::vector<std::vector<LoraSegment>> segments(3);
  for (int o = 0; o < 3; ++o) {
    int begin = 0;
    for (int a = 0; a < 3; ++a) {
      const int end = begin + int(segment_rows[std::size_t(a)].size());
      // Projection 1 leaves adapter 1's rows alone.
      const LoraFactors* f = o == 1 && a == 1 ? nullptr : &adapters[std::size_t(3 * o + a)].factors;
      segments[std::size_t(o)].push_back({begin, end, f});
      begin = end;
    }
  }
  const int offsets[3] = {0, 64, 96};
  std::vector<float> tmp(order.size() * 16);
  std::vector<float> fused = batch.y, separate = batch.y;
  LoraOutput outputs[3];
  for (int o = 0; o < 3; ++o) outputs[o] = {segments[std::size_t(o)].data(), fused.data() + offsets[o], ldy};
  tbb::task_arena arena(2);
  arena.execute([&] {
    lora_sgmv(batch.x.data(), batch.ldx, order.data(), 3, outputs, 3, tmp.data(), 16);
    for (int o = 0; o < 3; ++o)
      lora_sgmv(batch.x.data(), batch.ldx, order.data(), segments[std::size_t(o)].data(), 3, tmp.data(), 16,
                separate.data() + offsets[o], ldy);
  });
  EXPECT_EQ(std::memcmp(fused.data(), separate.data(), fused.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(fused.data(), batch.y.data(), fused.size() * sizeof(float)), 0) << "the deltas are not zero";
}

TEST(LoraFactors, PacksATransposedBAndTheScale) {
  for (LoraElement element : {LoraElement::F32, LoraElement::F16, LoraElement::BF16}) {
    const Adapter ad(3, 5, 4, 0.5f, 11, element);
    const LoraFactors& f = ad.factors;
    EXPECT_EQ(f.rank(), 3);
    EXPECT_EQ(f.n_in(), 5);
    EXPECT_EQ(f.n_out(), 4);
    EXPECT_EQ(f.scale(), 0.5f);
    EXPECT_EQ(f.element(), element);
    EXPECT_EQ(f.bytes(), std::size_t(3 * (5 + 4)) * (element == LoraElement::F32 ? 4 : 2));
    auto value = [&](const void* p, std::size_t i) {
      if (element == LoraElement::F32) return static_cast<const float*>(p)[i];
      const uint16_t h = static_cast<const uint16_t*>(p)[i];
      return element == LoraElement::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    };
    for (std::size_t i = 0; i < ad.a.size(); ++i) EXPECT_EQ(value(f.a(), i), ad.a[i]) << element_name(element);
    for (int j = 0; j < 3; ++j)
      for (int n = 0; n < 4; ++n)
        EXPECT_EQ(value(f.b_t(), std::size_t(j) * 4 + n), ad.b[std::size_t(n) * 3 + j]) << element_name(element);
  }
}

// Many targets in one set (large enough for huge pages): each block on a cache line of its
// own, none overlapping another, every value where the kernel looks for it, and all of it
// still there after the set is moved.
TEST(LoraFactorSet, PacksEverySourceInOrderOnItsOwnCacheLine) {
  std::vector<Adapter> plain;
  std::vector<LoraFactorSource> sources;
  unsigned seed = 500;
  for (int i = 0; i < 40; ++i) {
    const LoraElement element = LoraElement(i % 3);
    plain.emplace_back(1 + i % 7, 100 + 37 * i, 90 + 53 * i, 0.25f * float(i + 1), seed++, element);
    const Adapter& ad = plain.back();
    sources.push_back({ad.a.data(), ad.b.data(), ad.rank, ad.n_in, ad.n_out, ad.scale, element});
  }
  LoraFactorSet moved_from(sources);
  const LoraFactorSet set = std::move(moved_from);
  ASSERT_EQ(set.size(), sources.size());
  const std::byte* previous_end = nullptr;
  for (std::size_t i = 0; i < set.size(); ++i) {
    const LoraFactors& f = set[i];
    const Adapter& ad = plain[i];
    EXPECT_EQ(f.rank(), ad.rank);
    EXPECT_EQ(f.n_in(), ad.n_in);
    EXPECT_EQ(f.n_out(), ad.n_out);
    EXPECT_EQ(f.scale(), ad.scale);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.a()) % 64, 0u) << i;
    const auto* begin = static_cast<const std::byte*>(f.a());
    if (previous_end) {
      EXPECT_GE(begin, previous_end) << i;
    }
    previous_end = begin + f.bytes();
    EXPECT_EQ(std::memcmp(f.a(), ad.factors.a(), f.bytes()), 0) << "target " << i;
  }
}

}  // namespace
