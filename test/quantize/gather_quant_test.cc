// Quantized gather phases (hvds_sparse_opts_t.quant_bits): DSAR's dense allgather,
// split-allgather's sparse allgather and ZEN's pull, ranks as threads over the in-process
// transport. Every rank holds the same bytes, every value is within the quantization bound of
// the exact sum, indices stay exact, the union size is counted before quantization, integers and
// the algorithms that sum after their exchange stay exact, bad or mismatched widths fail every
// rank alike; and the cost model's quantized terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cost_model.h"
#include "quantize.h"
#include "sparse_quant.h"
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
  std::vector<int64_t> indices;  // sparse results (sparse_out): the result's indices
  bool is_dense = false;
  size_t union_nnz = 0;
};

// Runs cs; sparse_out asks for a sparse result (its values land in dense, its indices in
// indices) instead of a dense output.
std::vector<Outcome> run(const QCase& cs, std::vector<Input>* ins_out = nullptr,
                         bool sparse_out = false) {
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
        if (!sparse_out) res.dense_out = o.dense.data();
        o.rc = hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), ins[p->rank].idx.size(),
                                      hvds_test::op_arg(cs.op), &opts, &res);
        o.error = p->error;
        o.algo = res.algorithm;
        o.union_nnz = res.union_nnz;
        if (sparse_out && o.rc == HVDS_SUCCESS) {
          size_t vb = cs.row * hvds__dtype_bytes(cs.dtype);
          o.is_dense = res.is_dense;
          for (size_t e = 0; e < res.nnz; e++) {
            int64_t i = res.is_dense ? (int64_t)e : static_cast<const int32_t*>(res.indices)[e];
            o.indices.push_back(i);
            memcpy(o.dense.data() + i * vb, static_cast<const char*>(res.values) + e * vb, vb);
          }
        }
        hvds__sparse_result_free(&res);
      },
      10000);
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
  if (ins_out != nullptr) *ins_out = ins;
  return outs;
}

// Per flat value, a bound on the largest |exact sum| in its quantization bucket. DSAR's buckets
// run over each rank's range of rows, flattened; the sparse gathers' buckets over an owner's
// stored entries (split-allgather: a range; ZEN: a hashed partition), so the tensor's largest
// |sum| bounds them.
std::vector<double> bucket_max(const Reference& ref, const QCase& cs) {
  std::vector<double> out(cs.dim * cs.row, 0);
  if (cs.algo != HVDS_SPARSE_DSAR) {
    double mx = 0;
    for (double v : ref.sum) mx = std::max(mx, std::fabs(v));
    std::fill(out.begin(), out.end(), mx);
    return out;
  }
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

// Runs cs and checks: success, cs.algo ran, identical bytes everywhere, within the bound; returns
// how many values differ from the exact result (quantization really happened when > 0).
size_t check_quantized(const QCase& cs, bool sparse_out = false) {
  SCOPED_TRACE(cs.str() + (sparse_out ? " sparse_out" : " dense_out"));
  std::vector<Input> ins;
  auto outs = run(cs, &ins, sparse_out);
  Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
  auto mx = bucket_max(ref, cs);
  double s = hvds__quant_levels(cs.bits), div = cs.op == HVDS_AVERAGE ? cs.P : 1;
  size_t inexact = 0;
  for (int r = 0; r < cs.P; r++) {
    EXPECT_EQ(outs[r].rc, HVDS_SUCCESS) << "rank " << r << ": " << outs[r].error;
    if (outs[r].rc != HVDS_SUCCESS) return 0;
    EXPECT_EQ(outs[r].algo, cs.algo);
    EXPECT_EQ(outs[r].dense, outs[0].dense) << "rank " << r << " differs from rank 0";
    EXPECT_EQ(outs[r].indices, outs[0].indices) << "rank " << r << " differs from rank 0";
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

// The algorithms whose gather phase follows a full-precision reduce.
const hvds_sparse_algo_t kGathers[] = {HVDS_SPARSE_DSAR, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN};

// A packed block round-trips its head exactly (delta-coded indices of both widths, gaps of 1 to
// 2^40, or a copied head), with values quantized (8 bits) or as they are (0: every bit kept),
// and a block of the wrong size or shape is refused.
TEST(GatherQuantized, PackedBlocksKeepIndicesExactly) {
  for (auto [bits, it] : {std::pair{8, HVDS_INT32}, std::pair{8, HVDS_INT64},
                          std::pair{0, HVDS_INT32}, std::pair{0, HVDS_INT64}}) {
    size_t dim = it == HVDS_INT32 ? ((size_t)1 << 31) - 1 : (size_t)1 << 50;
    hvds_sparse_layout_t lay = {dim, 2, HVDS_FLOAT32, it};
    std::vector<int64_t> idx = {0, 1, 2, 130, 20000, 2000000, (int64_t)dim - 1};
    if (it == HVDS_INT64) idx.insert(idx.end() - 1, (int64_t)1 << 45);
    size_t n = idx.size(), isz = it == HVDS_INT32 ? 4 : 8, head = n * isz;
    std::vector<char> blk(hvds__pad8(head) + hvds__pad8(n * 8), 0);
    for (size_t i = 0; i < n; i++) hvds__sparse_idx_set(&lay, blk.data(), i, idx[i]);
    float* rows = reinterpret_cast<float*>(blk.data() + hvds__pad8(head));
    for (size_t i = 0; i < 2 * n; i++) rows[i] = i == 3 ? 0.0f : (float)i - 4.5f;
    hvds_qblock_shape_t shape = {n, head, 1};
    std::vector<char> packed(hvds__sparse_qblock_bound(&lay, &shape, bits));
    size_t bytes = 0;
    ASSERT_EQ(hvds__sparse_qblock_pack(&lay, bits, 7, blk.data(), &shape, packed.data(), &bytes),
              HVDS_SUCCESS);
    EXPECT_LE(bytes, packed.size());
    EXPECT_EQ(bytes % 8, 0u);
    std::vector<char> out(blk.size(), 1);
    uint64_t nonzero = 5;
    ASSERT_EQ(
        hvds__sparse_qblock_unpack(&lay, bits, packed.data(), bytes, &shape, out.data(), &nonzero),
        HVDS_SUCCESS);
    EXPECT_EQ(nonzero, 5u + n);  // row 1 holds a zero and a non-zero value
    for (size_t i = 0; i < n; i++) EXPECT_EQ(hvds__sparse_idx_get(&lay, out.data(), i), idx[i]);
    if (bits == 0) {  // values as they are: the rows and their padding, byte for byte
      EXPECT_TRUE(
          std::equal(blk.begin() + hvds__pad8(head), blk.end(), out.begin() + hvds__pad8(head)));
    }
    EXPECT_EQ(hvds__sparse_qblock_unpack(&lay, bits, packed.data(), bytes - 8, &shape, out.data(),
                                         &nonzero),
              HVDS_INTERNAL_ERROR);
    hvds_qblock_shape_t fewer = {n - 1, head - isz, 1};
    EXPECT_EQ(
        hvds__sparse_qblock_unpack(&lay, bits, packed.data(), bytes, &fewer, out.data(), &nonzero),
        HVDS_INTERNAL_ERROR);
    hvds_qblock_shape_t copied = {n, head, 0};  // a head that is copied, not coded
    ASSERT_EQ(hvds__sparse_qblock_pack(&lay, bits, 7, blk.data(), &copied, packed.data(), &bytes),
              HVDS_SUCCESS);
    ASSERT_EQ(
        hvds__sparse_qblock_unpack(&lay, bits, packed.data(), bytes, &copied, out.data(), &nonzero),
        HVDS_SUCCESS);
    EXPECT_TRUE(std::equal(blk.begin(), blk.begin() + head, out.begin()));
  }
}

TEST(GatherQuantized, IdenticalOnEveryRankAndWithinBound) {
  for (hvds_sparse_algo_t a : kGathers) {
    for (int P : {2, 3, 4, 5}) {
      for (int bits : {2, 4, 8}) {
        QCase cs;
        cs.algo = a;
        cs.P = P;
        cs.bits = bits;
        EXPECT_GT(check_quantized(cs), 0u) << "nothing was quantized";
      }
    }
  }
}

TEST(GatherQuantized, LayoutsDtypesOpsAndInputs) {
  for (hvds_sparse_algo_t a : kGathers) {
    QCase cs;
    cs.algo = a;
    cs.row = 3;  // row-sparse: buckets over the flattened rows
    cs.dim = 1111;
    cs.k = 400;
    check_quantized(cs);
    check_quantized(cs, true);
    cs = QCase();
    cs.algo = a;
    cs.dtype = HVDS_FLOAT64;
    cs.op = HVDS_AVERAGE;
    check_quantized(cs);
    cs = QCase();
    cs.algo = a;
    cs.dtype = HVDS_FLOAT16;
    cs.bits = 8;
    check_quantized(cs);
    for (int gen : {sparse_test::kAllDense, sparse_test::kSomeEmpty, sparse_test::kZipf}) {
      cs = QCase();
      cs.algo = a;
      cs.gen = gen;
      cs.P = 4;
      check_quantized(cs);
      check_quantized(cs, true);
    }
    cs = QCase();
    cs.algo = a;
    cs.gen = sparse_test::kEmpty;  // all zero: exact zeros
    EXPECT_EQ(check_quantized(cs), 0u);
    cs = QCase();
    cs.algo = a;
    cs.dim = 2;  // fewer rows than ranks: empty ranges encode to nothing
    cs.k = 2;
    cs.P = 5;
    check_quantized(cs);
  }
}

// Sparse gathers quantize values only: a sparse result holds exactly the union of the inputs'
// indices, and the union size the runtime learns the overlap from is counted before
// quantization (a value rounded to zero still counts).
TEST(GatherQuantized, IndicesAndUnionExact) {
  for (hvds_sparse_algo_t a : {HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN}) {
    for (int P : {3, 4}) {
      QCase cs;
      cs.algo = a;
      cs.P = P;
      cs.k = 40;    // union at most 3.2%: sparse (2-bit ranges turn dense past about 6%)
      cs.bits = 2;  // one level per sign: many values round to zero
      SCOPED_TRACE(cs.str());
      std::vector<Input> ins;
      auto outs = run(cs, &ins, true);
      Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
      std::vector<int64_t> support(ref.support.begin(), ref.support.end());
      size_t zeros = 0;
      for (size_t i : support)
        zeros += hvds_test::get(cs.dtype, outs[0].dense.data(), i) == 0 && ref.sum[i] != 0;
      EXPECT_GT(zeros, 0u) << "no value rounded to zero: the union check shows nothing";
      for (int r = 0; r < P; r++) {
        ASSERT_EQ(outs[r].rc, HVDS_SUCCESS) << outs[r].error;
        EXPECT_FALSE(outs[r].is_dense);
        EXPECT_EQ(outs[r].indices, support) << "rank " << r;
        EXPECT_EQ(outs[r].union_nnz, sparse_test::nonzero_rows(ref, cs.row)) << "rank " << r;
      }
    }
  }
  QCase cs;  // DSAR's result is dense; its union is counted before quantization too
  cs.k = 40;
  cs.bits = 2;
  std::vector<Input> ins;
  auto outs = run(cs, &ins);
  Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
  for (int r = 0; r < cs.P; r++) {
    ASSERT_EQ(outs[r].rc, HVDS_SUCCESS) << outs[r].error;
    EXPECT_EQ(outs[r].union_nnz, sparse_test::nonzero_rows(ref, cs.row)) << "rank " << r;
  }
}

// With quantized values a range turns dense sooner (hvds__sparse_qdense_rule): at 4 bits a range
// about 40% full goes dense in split-allgather's gather and still sums right.
TEST(GatherQuantized, SplitAllgatherTurnsRangesDense) {
  hvds_sparse_layout_t lay = {5000, 1, HVDS_FLOAT32, HVDS_INT32};
  EXPECT_FALSE(
      hvds__sparse_qdense_rule(&lay, 1500, 5000, 4));          // 30%: 1-byte gaps, half-byte values
  EXPECT_TRUE(hvds__sparse_qdense_rule(&lay, 1700, 5000, 4));  // 34%
  EXPECT_FALSE(hvds__sparse_dense_rule(&lay, 1700, 5000));     // full precision: at 50%
  QCase cs;
  cs.algo = HVDS_SPARSE_SSAR_SAG;
  cs.k = 800;  // union about 40% at P = 3
  EXPECT_GT(check_quantized(cs), 0u);
  EXPECT_GT(check_quantized(cs, true), 0u);
  std::vector<Input> ins;
  auto outs = run(cs, &ins, true);
  Reference ref = sparse_test::reference(ins, cs.dim, cs.row);
  // Dense ranges list every index of their range: more indices than the union.
  EXPECT_GT(outs[0].indices.size(), ref.support.size());
  EXPECT_EQ(outs[0].union_nnz, sparse_test::nonzero_rows(ref, cs.row));
}

// quant_bits applies to floating point in the gather phases only: integers everywhere and the
// algorithms that sum after their exchange (dense, allgather, recursive doubling) stay exact.
TEST(GatherQuantized, ExactWhereItDoesNotApply) {
  for (hvds_sparse_algo_t a : {HVDS_SPARSE_DSAR, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN,
                               HVDS_SPARSE_DENSE, HVDS_SPARSE_ALLGATHER, HVDS_SPARSE_SSAR_RD}) {
    for (bool integers : {true, false}) {
      if (!integers && (a == HVDS_SPARSE_DSAR || a == HVDS_SPARSE_SSAR_SAG || a == HVDS_SPARSE_ZEN))
        continue;  // quantized: GatherQuantized.IdenticalOnEveryRankAndWithinBound
      QCase cs;
      cs.algo = a;
      cs.dtype = integers ? HVDS_INT32 : HVDS_FLOAT32;
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
  }
  QCase one;  // a single rank moves nothing and is not quantized
  one.P = 1;
  EXPECT_EQ(check_quantized(one), 0u);
}

TEST(GatherQuantized, BadOrMismatchedWidthFailsEveryRank) {
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

// With quant_bits the gather phases' values shrink to bits / 8 bytes plus a 4-byte scale per
// 1024 values: DSAR's allgather by exactly that, split-allgather's and ZEN's gathers too (their
// indices or bitmaps stay); the algorithms that sum after the exchange are unchanged.
TEST(QuantCostModel, GatherTermsShrink) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 0, 0, 0, 0, 0};  // 1 Gbit/s
  for (int P : {2, 3, 4, 8}) {
    hvds_sparse_problem_t x = {P, 1e7, 1, 4, 4, 2e5, -1, 0, 0, 0, 0, 0, 0};
    hvds_sparse_problem_t plain = x;
    double full = hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net);
    for (int bits : {2, 4, 8}) {
      x.quant_bits = bits;
      double q = hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net);
      double part = 1e7 / P;
      double saved = (P - 1) * (part * 4 - (part * bits / 8.0 + part / 1024.0 * 4)) * net.beta;
      EXPECT_NEAR(full - q, saved, 1e-9 * full) << "P " << P << " bits " << bits;
      for (hvds_sparse_algo_t a : {HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_ZEN}) {
        double qa = hvds__sparse_cost(a, &x, &net), fa = hvds__sparse_cost(a, &plain, &net);
        EXPECT_LT(qa, fa) << hvds__sparse_algo_name(a) << " P " << P << " bits " << bits;
      }
      for (hvds_sparse_algo_t a : {HVDS_SPARSE_DENSE, HVDS_SPARSE_ALLGATHER, HVDS_SPARSE_SSAR_RD})
        EXPECT_EQ(hvds__sparse_cost(a, &x, &net), hvds__sparse_cost(a, &plain, &net));
    }
    x.quant_bits = 3;  // not a width: full precision
    EXPECT_EQ(hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net), full);
  }
  // A result that fills in: full-precision DSAR is at best 2x dense, so the selector's pick may
  // be dense; at 4 bits DSAR beats dense clearly. ZEN, whose push goes packed too (0.75 x 3e6
  // entries of 5 bytes against DSAR's split of 8), and whose pull is quantized as DSAR's
  // allgather is, beats both.
  hvds_sparse_problem_t x = {4, 1e7, 1, 4, 4, 3e6, -1, 4, 0, 0, 0, 0, 0};
  EXPECT_LT(hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net),
            0.6 * hvds__sparse_cost(HVDS_SPARSE_DENSE, &x, &net));
  EXPECT_EQ(hvds__sparse_select(&x, &net, nullptr), HVDS_SPARSE_ZEN);
}

// The quantizer's own time: DSAR's busiest rank encodes its range and decodes all N values;
// the sparse gathers encode their owned entries and decode the union.
TEST(QuantCostModel, EncodeAndDecodePriced) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 0, 0, 0, 0, 0};
  hvds_sparse_net_t timed = net;
  timed.qenc = 6e-9;
  timed.qdec = 2e-9;
  hvds_sparse_problem_t x = {4, 1e7, 1, 4, 4, 2e5, 1.0, 4, 0, 0, 0, 0, 0};  // identical supports
  double extra = hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &timed) -
                 hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net);
  EXPECT_NEAR(extra, 1e7 / 4 * 6e-9 + 1e7 * 2e-9, 1e-12);
  extra =
      hvds__sparse_cost(HVDS_SPARSE_ZEN, &x, &timed) - hvds__sparse_cost(HVDS_SPARSE_ZEN, &x, &net);
  EXPECT_NEAR(extra, 2e5 / 4 * 6e-9 + 2e5 * 2e-9, 1e-12);
  extra = hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &x, &timed) -
          hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &x, &net);
  EXPECT_NEAR(extra, 2e5 / 4 * 6e-9 + 2e5 * 2e-9, 1e-12);
  hvds_sparse_problem_t plain = x;  // no quantization: no quantizer time
  plain.quant_bits = 0;
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++)
    EXPECT_EQ(hvds__sparse_cost((hvds_sparse_algo_t)a, &plain, &timed),
              hvds__sparse_cost((hvds_sparse_algo_t)a, &plain, &net));
}

// Split-allgather's quantized ranges that turn dense cost it DSAR's dense passes and more (the
// owner densifies, every rank unpacks and copies N rows), so where both gather dense ranges the
// selector takes DSAR, which adds straight into its dense range.
TEST(QuantCostModel, DenseQuantizedRangesFavourDsar) {
  hvds_sparse_net_t net = {10e-6, 1.0 / 125e6, 6e-9, 15e-9, 6e-9, 2e-9, 80e-6};
  // 10% uniform
  hvds_sparse_problem_t x = {4, 1 << 24, 1, 4, 4, 0.1 * (1 << 24), -1, 4, 0, 0, 0, 0, 0};
  EXPECT_LT(hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net),
            hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &x, &net));
  x.nnz = 0.01 * (1 << 24);  // 1%: the ranges stay sparse and split-allgather is cheaper
  EXPECT_LT(hvds__sparse_cost(HVDS_SPARSE_SSAR_SAG, &x, &net),
            hvds__sparse_cost(HVDS_SPARSE_DSAR, &x, &net));
}
