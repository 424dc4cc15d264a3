// Inputs, the float64 reference, the tolerance and the guard check.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "compare.h"
#include "guard.h"
#include "reference.h"

namespace tilelab {
namespace {

TEST(Generator, IsDeterministicAndDistinguishesItsArguments) {
  EXPECT_EQ(input_value(1, MatrixId::kM, 10, Distribution::kUniform),
            input_value(1, MatrixId::kM, 10, Distribution::kUniform));
  EXPECT_NE(input_value(1, MatrixId::kM, 10, Distribution::kUniform),
            input_value(2, MatrixId::kM, 10, Distribution::kUniform));
  EXPECT_NE(input_value(1, MatrixId::kM, 10, Distribution::kUniform),
            input_value(1, MatrixId::kN, 10, Distribution::kUniform));
  EXPECT_NE(derive_seed(5, 0), derive_seed(5, 1));
}

TEST(Generator, UniformValuesAreExactFloatsInMinusOneToOne) {
  const std::vector<float> v = generate_matrix(3, MatrixId::kM, 100000, Distribution::kUniform);
  double mean = 0;
  for (float x : v) {
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
    ASSERT_EQ(x * 8388608.0f, std::nearbyint(x * 8388608.0f)) << "not a multiple of 2^-23: " << x;
    mean += x;
  }
  EXPECT_NEAR(mean / v.size(), 0.0, 0.01);  // zero mean: outputs spread around 0
}

TEST(Generator, SmallIntsCoverMinusEightToEight) {
  const std::vector<float> v = generate_matrix(3, MatrixId::kN, 10000, Distribution::kSmallInt);
  std::set<int> seen;
  for (float x : v) seen.insert(static_cast<int>(x));
  EXPECT_EQ(seen.size(), 17u);
  EXPECT_EQ(*seen.begin(), -8);
  EXPECT_EQ(*seen.rbegin(), 8);
}

TEST(Generator, SamplePositionsStartAtTheCornersAndStayInside) {
  const Position c0 = sample_position(9, 0, 5, 7), c1 = sample_position(9, 1, 5, 7);
  EXPECT_EQ(c0.row, 0);
  EXPECT_EQ(c0.col, 0);
  EXPECT_EQ(c1.row, 4);
  EXPECT_EQ(c1.col, 6);
  for (int s = 0; s < 1000; ++s) {
    const Position p = sample_position(9, s, 5, 7);
    ASSERT_TRUE(p.row >= 0 && p.row < 5 && p.col >= 0 && p.col < 7);
  }
}

TEST(Reference, MatchesAHandComputedProduct) {
  // [1 2 3]   [1 0]   [ 4  -4]
  // [4 5 6] x [0 1] = [10  -7]
  //           [1 -2]
  HostInputs in{2, 3, 2, {1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, -2}};
  const ReferenceProduct p = reference_product(in, 1);
  EXPECT_EQ(p.value, (std::vector<double>{4, -4, 10, -7}));
  EXPECT_EQ(p.magnitude, (std::vector<double>{4, 8, 10, 17}));
}

TEST(Reference, ThreadedAndSingleThreadedAgreeAndMatchSampledElements) {
  CaseSpec spec;
  spec.j = 70;
  spec.k = 129;
  spec.l = 33;
  spec.inputs.seed = 11;
  const HostInputs in = host_inputs(spec);
  const ReferenceProduct one = reference_product(in, 1);
  const ReferenceProduct many = reference_product(in, 4);
  EXPECT_EQ(one.value, many.value);
  for (int s = 0; s < 50; ++s) {
    const Position pos = sample_position(2, s, spec.j, spec.l);
    const ReferenceElement e =
        generated_reference_element(11, Distribution::kUniform, spec.k, spec.l, pos.row, pos.col);
    EXPECT_DOUBLE_EQ(e.value, one.value[pos.row * spec.l + pos.col]);
    EXPECT_DOUBLE_EQ(e.magnitude, one.magnitude[pos.row * spec.l + pos.col]);
  }
}

TEST(Tolerance, GrowsWithSqrtKAndVanishesForExactInputs) {
  const Tolerance tol;  // factor 16
  EXPECT_DOUBLE_EQ(allowed_error(tol, 1, 1.0, false), 16 * 0x1.0p-24);
  EXPECT_DOUBLE_EQ(allowed_error(tol, 1024, 2.0, false), 16 * 32 * 0x1.0p-24 * 2.0);
  EXPECT_EQ(allowed_error(tol, 1024, 2.0, true), 0.0);
}

TEST(Tolerance, ExactnessComesFromTheData) {
  HostInputs ints{2, 2, 2, {1, -8, 8, 0}, {3, 2, -1, 4}};
  EXPECT_TRUE(exact_inputs(ints));
  HostInputs big = ints;
  big.M[0] = 9;  // products up to 72: no longer guaranteed exact at every k
  EXPECT_FALSE(exact_inputs(big));
  HostInputs frac = ints;
  frac.N[1] = 0.5f;
  EXPECT_FALSE(exact_inputs(frac));
}

// A float32 dot product in the naive order, as an honest kernel computes it.
std::vector<float> float_product(const HostInputs& in) {
  std::vector<float> p(size_t(in.j) * in.l);
  for (int r = 0; r < in.j; ++r)
    for (int c = 0; c < in.l; ++c) {
      float sum = 0;
      for (int t = 0; t < in.k; ++t) sum += in.M[size_t(r) * in.k + t] * in.N[size_t(t) * in.l + c];
      p[size_t(r) * in.l + c] = sum;
    }
  return p;
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = float_bits(v[i]);
  return b;
}

TEST(Compare, HonestFloatProductPassesWellInsideTheTolerance) {
  CaseSpec spec;
  spec.j = 40;
  spec.k = 2048;
  spec.l = 40;
  spec.inputs.seed = 21;
  const HostInputs in = host_inputs(spec);
  const ReferenceProduct ref = reference_product(in);
  const Comparison c = compare_output(bits_of(float_product(in)).data(), ref, spec.k, Tolerance{}, false, 0x7FC0DEADu);
  EXPECT_TRUE(c.passed());
  EXPECT_EQ(c.checked, 1600u);
  EXPECT_LT(c.worst_ratio, 0.2);  // 16 x sqrt(k) u |M||N| leaves a wide margin
  EXPECT_GT(c.worst_ratio, 0.0);  // float32 does round
}

TEST(Compare, ClassifiesWrongNanAndUnwrittenElements) {
  HostInputs in{2, 2, 2, {1, 2, 3, 4}, {1, 0, 0, 1}};  // identity: P = M
  const ReferenceProduct ref = reference_product(in, 1);
  const uint32_t poison = 0x7FC0DEADu;
  std::vector<uint32_t> got = bits_of({1, 2, 3, 4});
  got[1] = float_bits(2.5f);
  got[2] = float_bits(std::nanf(""));
  got[3] = poison;
  const Comparison c = compare_output(got.data(), ref, 2, Tolerance{}, true, poison);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.wrong, 1u);
  EXPECT_EQ(c.not_a_number, 1u);
  EXPECT_EQ(c.unwritten, 1u);
  ASSERT_EQ(c.first.size(), 3u);
  EXPECT_EQ(c.first[0].row, 0);
  EXPECT_EQ(c.first[0].col, 1);
  EXPECT_EQ(c.first[0].expected, 2.0);
  EXPECT_EQ(c.first[0].got, 2.5f);
  EXPECT_EQ(c.first[1].fault, ElementFault::kNotANumber);
  EXPECT_EQ(c.first[2].fault, ElementFault::kUnwritten);
}

TEST(Compare, InfinityIsWrongAndExactCasesAllowNoRounding) {
  HostInputs in{1, 1, 1, {3}, {3}};
  const ReferenceProduct ref = reference_product(in, 1);
  uint32_t inf = float_bits(INFINITY);
  EXPECT_EQ(compare_output(&inf, ref, 1, Tolerance{}, false, 0).wrong, 1u);
  uint32_t off_by_an_ulp = float_bits(std::nextafter(9.0f, 10.0f));
  EXPECT_EQ(compare_output(&off_by_an_ulp, ref, 1, Tolerance{}, true, 0).wrong, 1u);
  EXPECT_TRUE(compare_output(&off_by_an_ulp, ref, 1, Tolerance{}, false, 0).passed());
}

TEST(Compare, ReportsAtMostTheRequestedNumberOfElements) {
  HostInputs in{3, 1, 3, {1, 1, 1}, {1, 1, 1}};
  const ReferenceProduct ref = reference_product(in, 1);
  std::vector<uint32_t> zeros(9, float_bits(0.0f));
  const Comparison c = compare_output(zeros.data(), ref, 1, Tolerance{}, true, 0x7FC0DEADu, 2);
  EXPECT_EQ(c.wrong, 9u);
  EXPECT_EQ(c.first.size(), 2u);
}

TEST(Guard, ReportsChangesOnBothSidesWithOffsetsRelativeToP) {
  const uint32_t g = 0x7FBADBADu;
  std::vector<uint32_t> region(4 + 6 + 4, g);
  for (int i = 4; i < 10; ++i) region[i] = 0;  // P itself may be anything
  EXPECT_TRUE(check_guards(region.data(), 4, 6, g).intact());
  region[3] = 1;   // P[-1]
  region[10] = 1;  // P[6], one past the end
  region[13] = 1;  // P[9]
  const GuardReport r = check_guards(region.data(), 4, 6, g);
  EXPECT_FALSE(r.intact());
  EXPECT_EQ(r.modified_before, 1u);
  EXPECT_EQ(r.modified_after, 2u);
  EXPECT_EQ(r.first_offsets, (std::vector<int64_t>{-1, 6, 9}));
}

// A timing case reads back its two guards alone, not P between them: the
// same report, with offsets still relative to P.
TEST(Guard, CopiesOfTheTwoGuardsGiveTheSameReport) {
  const uint32_t g = 0x7FBADBADu;
  std::vector<uint32_t> before(4, g), after(4, g);
  EXPECT_TRUE(check_guard_copies(before.data(), after.data(), 4, 6, g).intact());
  before[3] = 1;  // P[-1]
  after[0] = 1;   // P[6]
  after[3] = 1;   // P[9]
  const GuardReport r = check_guard_copies(before.data(), after.data(), 4, 6, g);
  EXPECT_EQ(r.modified_before, 1u);
  EXPECT_EQ(r.modified_after, 2u);
  EXPECT_EQ(r.first_offsets, (std::vector<int64_t>{-1, 6, 9}));
}

}  // namespace
}  // namespace tilelab
