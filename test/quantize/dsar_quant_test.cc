// DSAR_Split_allgather with a quantized allgather (hvds_sparse_opts_t.quant_bits), ranks as
// threads over the in-process transport: every rank holds the same bytes, every value is within
// the quantization bound of the exact sum, integers and other algorithms stay exact, bad or
// mismatched widths fail every rank alike; and the cost model's quantized DSAR term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cost_model.h"
#include "quantize.h"
#include "sparse_test_util.h"

namespace {

using sparse_test::Input;
using sparse_test::Reference;

struct QCase {
  int P = 3;
  int gen = sparse_test::kUniform;
  size_t dim = 5000, row = 1, k = 2000;
  hvds_dtype_t dtype = HVDS_FLOAT32;
  int op = HVDS_SUM;
  int bits = 4;
  hvds_sparse_algo_t algo = HVDS_SPARSE_DSAR;
  std::vector<int> rank_bits;  // per-rank override (mismatch tests)

  std::string str() const {
    return "P=" + std::to_string(P) + " " + sparse_test::gen_name(gen) +
           " dim=" + std::to_string(dim) + "x" + std::to_string(row) + " k=" + std::to_string(k) +
           " " + hvds_test::dtype_str(dtype) + " op=" + std::to_string(op) +
           " bits=" + std::to_string(bits) + " " + hvds__sparse_algo_name(algo);
  }
};

struct Outcome {
  hvds_result_t rc = HVDS_INTERNAL_ERROR;
  std::string error;
  std::vector<char> dense;
  hvds_sparse_algo_t algo = HVDS_SPARSE_AUTO;
};

std::vector<Outcome> run(const QCase& cs, std::vector<Input>* ins_out = nullptr) {
  std::vector<Input> ins;
  for (int r = 0; r < cs.P; r++)
    ins.push_back(sparse_test::make_input(cs.gen, cs.P, r, cs.dim, cs.row, cs.k, cs.dtype, 3));
  sparse_test::Case enc;
  enc.dtype = cs.dtype;
  enc.index_dtype = HVDS_INT32;
  std::vector<Outcome> outs(cs.P);
  auto world = inproc_world(cs.P);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        Outcome& o = outs[p->rank];
        std::vector<char> idx, val;
        sparse_test::encode(ins[p->rank], enc, &idx, &val);
        o.dense.assign(std::max<size_t>(cs.dim * cs.row * hvds__dtype_bytes(cs.dtype), 1), 0);
        hvds_sparse_layout_t lay = {cs.dim, cs.row, cs.dtype, HVDS_INT32};
        hvds_sparse_opts_t opts = HVDS_SPARSE_OPTS_INIT;
        opts.tag = 11;
        opts.algorithm = cs.algo;
        opts.quant_bits = cs.rank_bits.empty() ? cs.bits : cs.rank_bits[p->rank];
        hvds_sparse_result_t res = {};
        res.dense_out = o.dense.data();
        o.rc = hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), ins[p->rank].idx.size(),
                                      hvds_test::op_arg(cs.op), &opts, &res);
        o.error = p->error;
        o.algo = res.algorithm;
        hvds__sparse_result_free(&res);
      },
      10000);
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
  if (ins_out != nullptr) *ins_out = ins;
  return outs;
}

// Per flat value, the largest |exact sum| in its quantization bucket: buckets run over each
// rank's range of rows, flattened.
std::vector<double> bucket_max(const Reference& ref, const QCase& cs) {
  std::vector<double> out(cs.dim * cs.row, 0);
  for (int j = 0; j < cs.P; j++) {
    size_t lo = hvds__sparse_part_lo(0, cs.dim, cs.P, j) * cs.row;
    size_t hi = hvds__sparse_part_lo(0, cs.dim, cs.P, j + 1) * cs.row;
    for (size_t b = lo; b < hi; b += HVDS_QUANT_BUCKET) {
      size_t e = std::min(hi, b + HVDS_QUANT_BUCKET);
      double mx = 0;
      for (size_t i = b; i < e; i++) mx = std::max(mx, std::fabs(ref.sum[i]));
      for (size_t i = b; i < e; i++) out[i] = mx;
    }
  }
  return out;
}

// Runs cs and checks: success, DSAR ran, identical bytes everywhere, within the bound; returns
// how many values differ from the exact result (quantization really happened when > 0).
size_t check_quantized(const QCase& cs) {
  SCOPED_TRACE(cs.str());
  std::vector<Input> ins;
  auto outs = run(cs, &ins);
  Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
  auto mx = bucket_max(ref, cs);
  double s = hvds__quant_levels(cs.bits), div = cs.op == HVDS_AVERAGE ? cs.P : 1;
  size_t inexact = 0;
  for (int r = 0; r < cs.P; r++) {
    EXPECT_EQ(outs[r].rc, HVDS_SUCCESS) << "rank " << r << ": " << outs[r].error;
    if (outs[r].rc != HVDS_SUCCESS) return 0;
    EXPECT_EQ(outs[r].algo, cs.algo);
    EXPECT_EQ(outs[r].dense, outs[0].dense) << "rank " << r << " differs from rank 0";
  }
  for (size_t i = 0; i < cs.dim * cs.row; i++) {
    double want = sparse_test::expected(ref, i, cs.dtype, cs.op, cs.P);
    double got = hvds_test::get(cs.dtype, outs[0].dense.data(), i);
    double fp = sparse_test::tolerance(cs.dtype, ref.mag[i]);
    double bound = (mx[i] + fp) / s * (1 + 1e-3) / div + 2 * fp;
    EXPECT_LE(std::fabs(got - want), bound) << "value " << i;
    if (std::fabs(got - want) > 1e-3 * bound) inexact++;
  }
  return inexact;
}

}  // namespace

TEST(DsarQuantized, IdenticalOnEveryRankAndWithinBound) {
  for (int P : {2, 3, 4, 5}) {
    for (int bits : {2, 4, 8}) {
      QCase cs;
      cs.P = P;
      cs.bits = bits;
      EXPECT_GT(check_quantized(cs), 0u) << "nothing was quantized";
    }
  }
}

TEST(DsarQuantized, LayoutsDtypesOpsAndInputs) {
  QCase cs;
  cs.row = 3;  // row-sparse: buckets over the flattened rows of each range
  cs.dim = 1111;
  cs.k = 400;
  check_quantized(cs);
  cs = QCase();
  cs.dtype = HVDS_FLOAT64;
  cs.op = HVDS_AVERAGE;
  check_quantized(cs);
  cs = QCase();
  cs.dtype = HVDS_FLOAT16;
  cs.bits = 8;
  check_quantized(cs);
  for (int gen : {sparse_test::kAllDense, sparse_test::kSomeEmpty, sparse_test::kZipf}) {
    cs = QCase();
    cs.gen = gen;
    cs.P = 4;
    check_quantized(cs);
  }
  cs = QCase();
  cs.gen = sparse_test::kEmpty;  // all zero: exact zeros
  EXPECT_EQ(check_quantized(cs), 0u);
  cs = QCase();
  cs.dim = 2;  // fewer rows than ranks: empty ranges encode to nothing
  cs.k = 2;
  cs.P = 5;
  check_quantized(cs);
}

// quant_bits applies to floating point on DSAR only: integers and the other algorithms are exact.
TEST(DsarQuantized, ExactWhereItDoesNotApply) {
  for (hvds_sparse_algo_t a : {HVDS_SPARSE_DSAR, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_DENSE,
                               HVDS_SPARSE_ZEN, HVDS_SPARSE_ALLGATHER, HVDS_SPARSE_SSAR_RD}) {
    QCase cs;
    cs.algo = a;
    cs.dtype = a == HVDS_SPARSE_DSAR ? HVDS_INT32 : HVDS_FLOAT32;
    SCOPED_TRACE(cs.str());
    std::vector<Input> ins;
    auto outs = run(cs, &ins);
    Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
    for (int r = 0; r < cs.P; r++) {
      ASSERT_EQ(outs[r].rc, HVDS_SUCCESS) << outs[r].error;
      for (size_t i = 0; i < cs.dim; i++)
        ASSERT_EQ(hvds_test::get(cs.dtype, outs[r].dense.data(), i), ref.sum[i]) << i;
    }
  }
  QCase one;  // a single rank moves nothing and is not quantized
  one.P = 1;
  EXPECT_EQ(check_quantized(one), 0u);
}

TEST(DsarQuantized, BadOrMismatchedWidthFailsEveryRank) {
  QCase cs;
  cs.bits = 3;
  for (const Outcome& o : run(cs)) {
    EXPECT_EQ(o.rc, HVDS_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find("quant_bits 3"), std::string::npos) << o.error;
  }
  cs = QCase();
  cs.rank_bits = {4, 0, 4};
  for (const Outcome& o : run(cs)) EXPECT_EQ(o.rc, HVDS_PRECONDITION_ERROR) << o.error;
}

// With quant_bits the DSAR allgather term shrinks to bits / 8 bytes per value plus a 4-byte
// scale per 1024 values; nothing else changes.
TEST(QuantCostModel, DsarAllgatherShrinks) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 0, 0};  // 1 Gbit/s
  for (int P : {2, 4, 8}) {
    hvds_sparse_problem_t x = {P, 1e7, 1, 4, 4, 2e6, -1, 0, 0, 0};
    double full = hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net);
    for (int bits : {2, 4, 8}) {
      x.quant_bits = bits;
      double q = hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net);
      double part = 1e7 / P;
      double saved = (P - 1) * (part * 4 - (part * bits / 8.0 + part / 1024.0 * 4)) * net.beta;
      EXPECT_NEAR(full - q, saved, 1e-9 * full) << "P " << P << " bits " << bits;
      for (hvds_sparse_algo_t a : {HVDS_SPARSE_DENSE, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN}) {
        hvds_sparse_problem_t plain = x;
        plain.quant_bits = 0;
        EXPECT_EQ(hvds__sparse_cost(a, &x, &net), hvds__sparse_cost(a, &plain, &net));
      }
    }
    x.quant_bits = 3;  // not a width: full precision
    EXPECT_EQ(hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net), full);
  }
  // A result that fills in: full-precision DSAR is at best 2x dense, so the selector's pick may
  // be dense; at 4 bits DSAR wins clearly.
  hvds_sparse_problem_t x = {4, 1e7, 1, 4, 4, 3e6, -1, 4, 0, 0};
  EXPECT_EQ(hvds__sparse_select(&x, &net, nullptr), HVDS_SPARSE_DSAR);
}
