// Helpers for the sparse allreduce tests: input generators (uniform, Zipf-like embedding rows,
// controlled overlap, identical, disjoint, partly empty, empty, all dense), a serial dense
// reference that does not use the code under test, and a runner that executes one case with
// ranks as threads over the in-process transport and checks every rank's result.
#ifndef HVDS_TEST_SPARSE_TEST_UTIL_H_
#define HVDS_TEST_SPARSE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "inproc_p2p.h"
#include "sparse_allreduce.h"
#include "test_util.h"

namespace sparse_test {

using hvds_test::get;
using hvds_test::set;

enum Gen {
  kUniform,    // k random distinct indices per rank, independent across ranks
  kZipf,       // Zipf(1.1) draws over the index range: hot low ids, unsorted, duplicates
  kOverlap,    // half of each rank's indices from a pool shared by all ranks
  kIdentical,  // the same indices on every rank
  kDisjoint,   // rank r takes indices = r mod P
  kSomeEmpty,  // odd ranks have no entries, the others uniform
  kEmpty,      // no entries anywhere
  kAllDense,   // every index on every rank
  kGenCount
};

inline const char* gen_name(int g) {
  static const char* names[] = {"uniform",  "zipf",      "overlap", "identical",
                                "disjoint", "someempty", "empty",   "alldense"};
  return names[g];
}

// One rank's input as the caller would pass it: any order, duplicates allowed.
struct Input {
  std::vector<int64_t> idx;
  std::vector<double> val;  // idx.size() * row
};

inline bool is_unsigned_or_bool(hvds_dtype_t t) {
  return t == HVDS_UINT8 || t == HVDS_UINT16 || t == HVDS_BOOL;
}

// Small integer values, exact in every dtype: 1..3 for unsigned types, 1 for bool, else +-1..3.
inline double draw_value(std::mt19937_64& rng, hvds_dtype_t t) {
  if (t == HVDS_BOOL) return 1;
  int v = static_cast<int>(rng() % 3) + 1;
  return is_unsigned_or_bool(t) || rng() % 2 ? v : -v;
}

// k distinct indices from [0, dim) (all of them when k >= dim), in random order.
inline std::vector<int64_t> distinct(std::mt19937_64& rng, size_t dim, size_t k) {
  std::vector<int64_t> all(dim);
  for (size_t i = 0; i < dim; i++) all[i] = static_cast<int64_t>(i);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min(k, dim));
  return all;
}

inline std::vector<int64_t> zipf_draws(std::mt19937_64& rng, size_t dim, size_t draws) {
  std::vector<double> cdf(dim);
  double acc = 0;
  for (size_t i = 0; i < dim; i++) cdf[i] = acc += 1.0 / std::pow(static_cast<double>(i + 1), 1.1);
  std::uniform_real_distribution<double> u(0, acc);
  std::vector<int64_t> out(draws);
  for (auto& x : out)
    x = std::min<int64_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin(),
                          static_cast<int64_t>(dim) - 1);
  return out;
}

// Rank r's input for generator g; k is the target entry count per rank.
inline Input make_input(int g, int P, int r, size_t dim, size_t row, size_t k, hvds_dtype_t t,
                        uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(r) * 7919 + g);
  std::mt19937_64 shared(seed * 1000003 + 17 + g);  // identical on every rank
  Input in;
  switch (g) {
    case kUniform:
      in.idx = distinct(rng, dim, k);
      break;
    case kZipf:
      in.idx = zipf_draws(rng, dim, 2 * k);
      break;
    case kOverlap: {
      in.idx = distinct(shared, dim, k / 2);
      for (int64_t x : distinct(rng, dim, k - k / 2))
        if (std::find(in.idx.begin(), in.idx.end(), x) == in.idx.end()) in.idx.push_back(x);
      std::shuffle(in.idx.begin(), in.idx.end(), rng);
      break;
    }
    case kIdentical:
      in.idx = distinct(shared, dim, k);
      break;
    case kDisjoint:
      for (int64_t x : distinct(rng, dim, dim))
        if (x % P == r && in.idx.size() < k) in.idx.push_back(x);
      break;
    case kSomeEmpty:
      if (r % 2 == 0) in.idx = distinct(rng, dim, k);
      break;
    case kAllDense:
      for (size_t i = 0; i < dim; i++) in.idx.push_back(static_cast<int64_t>(i));
      break;
    default:
      break;
  }
  for (size_t i = 0; i < in.idx.size() * row; i++) in.val.push_back(draw_value(rng, t));
  return in;
}

// Rows of a dense reference: sum over ranks of each rank's scatter-added input.
struct Reference {
  std::vector<double> sum;    // dim * row
  std::vector<double> mag;    // sum of |contribution|, for float tolerances
  std::set<int64_t> support;  // union of the input indices
};

inline Reference reference(const std::vector<Input>& ins, size_t dim, size_t row) {
  Reference ref{std::vector<double>(dim * row, 0), std::vector<double>(dim * row, 0), {}};
  for (const Input& in : ins)
    for (size_t e = 0; e < in.idx.size(); e++) {
      ref.support.insert(in.idx[e]);
      for (size_t j = 0; j < row; j++) {
        ref.sum[in.idx[e] * row + j] += in.val[e * row + j];
        ref.mag[in.idx[e] * row + j] += std::fabs(in.val[e * row + j]);
      }
    }
  return ref;
}

// Rows of the sum with a non-zero element.
inline size_t nonzero_rows(const Reference& ref, size_t row) {
  size_t n = 0;
  for (size_t i = 0; i < ref.sum.size(); i += row)
    n += std::any_of(ref.sum.begin() + i, ref.sum.begin() + i + row, [](double v) { return v; });
  return n;
}

// Expected value of element i after op over P ranks (Sum or Average; bool sums are ORs).
inline double expected(const Reference& ref, size_t i, hvds_dtype_t t, int op, int P) {
  double v = ref.sum[i];
  if (t == HVDS_BOOL) return v != 0;
  if (op != HVDS_AVERAGE) return v;
  double scaled = v * (1.0 / P);
  return hvds_test::is_float(t) ? scaled : std::trunc(scaled);
}

inline double tolerance(hvds_dtype_t t, double mag) {
  switch (t) {
    case HVDS_FLOAT32:
      return 1e-5 * mag + 1e-6;
    case HVDS_FLOAT64:
      return 1e-12 * mag + 1e-12;
    case HVDS_FLOAT16:
      return 4e-3 * mag + 1e-3;  // each partial sum rounds to 11 bits
    case HVDS_BFLOAT16:
      return 3e-2 * mag + 1e-2;  // ... to 8 bits
    default:
      return 0;  // integers: exact
  }
}

struct Case {
  hvds_sparse_algo_t algo = HVDS_SPARSE_AUTO;
  int P = 1;
  int gen = kUniform;
  size_t dim = 1000, row = 1, k = 50;
  hvds_dtype_t dtype = HVDS_FLOAT32, index_dtype = HVDS_INT32;
  int op = HVDS_SUM;
  bool dense_out = false;
  uint64_t seed = 1;
  double overlap = -1;
  int pack = 0;  // hvds_sparse_opts_t.pack_indices

  std::string str() const {
    return std::string(hvds__sparse_algo_name(algo)) + " P=" + std::to_string(P) + " " +
           gen_name(gen) + " dim=" + std::to_string(dim) + "x" + std::to_string(row) +
           " k=" + std::to_string(k) + " " + hvds_test::dtype_str(dtype) + "/" +
           hvds_test::dtype_str(index_dtype) + " op=" + std::to_string(op) +
           (dense_out ? " dense_out" : " sparse_out") + " seed=" + std::to_string(seed) +
           " pack=" + std::to_string(pack);
  }
};

// What one rank saw.
struct RankOutcome {
  hvds_result_t rc = HVDS_INTERNAL_ERROR;
  std::string error;
  std::vector<double> dense;  // the result as dim * row values
  std::vector<char> bytes;    // the result's raw bytes (indices, then values)
  std::vector<int64_t> indices;
  bool sparse_sorted = true;
  bool is_dense = false;  // the sparse result came back dense
  hvds_sparse_result_t res{};
};

// Encodes rank input for the C call.
inline void encode(const Input& in, const Case& cs, std::vector<char>* idx,
                   std::vector<char>* val) {
  size_t isz = cs.index_dtype == HVDS_INT32 ? 4 : 8, vsz = hvds__dtype_bytes(cs.dtype);
  idx->assign(in.idx.size() * isz, 0);
  val->assign(in.val.size() * vsz, 0);
  for (size_t i = 0; i < in.idx.size(); i++) {
    if (isz == 4) {
      int32_t x = static_cast<int32_t>(in.idx[i]);
      memcpy(idx->data() + 4 * i, &x, 4);
    } else {
      memcpy(idx->data() + 8 * i, &in.idx[i], 8);
    }
  }
  for (size_t i = 0; i < in.val.size(); i++) set(cs.dtype, val->data(), i, in.val[i]);
}

// Decodes the result on one rank into dense values, raw bytes and the sparse support.
inline void decode(const Case& cs, const hvds_sparse_result_t& res, const std::vector<char>& dense,
                   RankOutcome* out) {
  size_t vsz = hvds__dtype_bytes(cs.dtype), isz = cs.index_dtype == HVDS_INT32 ? 4 : 8;
  size_t n = cs.dim * cs.row;
  out->dense.assign(n, 0);
  if (cs.dense_out) {
    for (size_t i = 0; i < n; i++) out->dense[i] = get(cs.dtype, dense.data(), i);
    out->bytes.assign(dense.begin(), dense.begin() + n * vsz);
    return;
  }
  const char* v = static_cast<const char*>(res.values);
  out->is_dense = res.is_dense;
  if (res.is_dense) {
    EXPECT_EQ(res.nnz, cs.dim) << cs.str();
    for (size_t i = 0; i < n; i++) out->dense[i] = get(cs.dtype, v, i);
    out->bytes.assign(v, v + n * vsz);
    return;
  }
  for (size_t e = 0; e < res.nnz; e++) {
    int64_t x = isz == 4 ? static_cast<const int32_t*>(res.indices)[e]
                         : static_cast<const int64_t*>(res.indices)[e];
    if (!out->indices.empty() && x <= out->indices.back()) out->sparse_sorted = false;
    out->indices.push_back(x);
    if (x < 0 || static_cast<size_t>(x) >= cs.dim) continue;
    for (size_t j = 0; j < cs.row; j++)
      out->dense[x * cs.row + j] = get(cs.dtype, v, e * cs.row + j);
  }
  const char* ib = static_cast<const char*>(res.indices);
  out->bytes.assign(ib, ib + res.nnz * isz);
  if (res.nnz > 0) out->bytes.insert(out->bytes.end(), v, v + res.nnz * cs.row * vsz);
}

// Runs cs on P threads and checks every rank against the reference.
inline void run_case(const Case& cs) {
  SCOPED_TRACE(cs.str());
  std::vector<Input> ins;
  for (int r = 0; r < cs.P; r++)
    ins.push_back(make_input(cs.gen, cs.P, r, cs.dim, cs.row, cs.k, cs.dtype, cs.seed));
  Reference ref = reference(ins, cs.dim, cs.row);
  std::vector<RankOutcome> outs(cs.P);
  auto world = inproc_world(cs.P);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        RankOutcome& o = outs[p->rank];
        size_t dense_bytes = cs.dim * cs.row * hvds__dtype_bytes(cs.dtype);
        std::vector<char> idx, val, dense(cs.dense_out ? std::max<size_t>(dense_bytes, 1) : 0);
        encode(ins[p->rank], cs, &idx, &val);
        hvds_sparse_layout_t lay = {cs.dim, cs.row, cs.dtype, cs.index_dtype};
        hvds_sparse_opts_t opts = HVDS_SPARSE_OPTS_INIT;
        opts.tag = 7;
        opts.algorithm = cs.algo;
        opts.overlap = cs.overlap;
        opts.pack_indices = cs.pack;
        o.res.dense_out = cs.dense_out ? dense.data() : nullptr;
        o.rc = hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), ins[p->rank].idx.size(),
                                      hvds_test::op_arg(cs.op), &opts, &o.res);
        o.error = p->error;
        if (o.rc != HVDS_SUCCESS) return;
        decode(cs, o.res, dense, &o);
        hvds__sparse_result_free(&o.res);
      },
      10000);
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
  for (int r = 0; r < cs.P; r++) {
    const RankOutcome& o = outs[r];
    ASSERT_EQ(o.rc, HVDS_SUCCESS) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(o.sparse_sorted) << "rank " << r << ": sparse indices not strictly ascending";
    if (cs.algo != HVDS_SPARSE_AUTO) {
      EXPECT_EQ(o.res.algorithm, cs.algo);
    }
    EXPECT_EQ(o.bytes, outs[0].bytes) << "rank " << r << " differs from rank 0";
    for (size_t i = 0; i < cs.dim * cs.row; i++) {
      double want = expected(ref, i, cs.dtype, cs.op, cs.P);
      ASSERT_NEAR(o.dense[i], want, tolerance(cs.dtype, ref.mag[i]))
          << "rank " << r << " element " << i << " (index " << i / cs.row << ")";
    }
    if (!cs.dense_out && !o.is_dense) {
      // The sparse result holds exactly the input indices: nothing dropped (even if it summed
      // to 0), nothing added (a position no rank sent, with a zero).
      std::set<int64_t> got(o.indices.begin(), o.indices.end());
      for (int64_t x : ref.support) ASSERT_TRUE(got.count(x)) << "index " << x << " dropped";
      for (int64_t x : got) ASSERT_TRUE(ref.support.count(x)) << "index " << x << " added";
    }
    // The union size: the support less the rows that summed to zero, on every rank; the overlap
    // the model was given is rank 0's (here every rank's).
    EXPECT_EQ(o.res.union_nnz, nonzero_rows(ref, cs.row)) << "rank " << r;
    EXPECT_EQ(o.res.overlap, cs.overlap < 0 ? -1.0 : cs.overlap) << "rank " << r;
  }
}

}  // namespace sparse_test

#endif  // HVDS_TEST_SPARSE_TEST_UTIL_H_
