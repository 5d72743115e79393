// Failures of the sparse allreduce: a bad input on one rank fails every rank with the same
// message and no rank waits (each test runs with a short transport timeout, so a hang would show
// up as a timeout error, and no message may be left unreceived); disagreements between ranks and
// unsupported ops fail everywhere too; the dense algorithm handles Min, Max and Product.
#include <gtest/gtest.h>

#include "sparse_test_util.h"

using namespace sparse_test;

namespace {

const hvds_sparse_algo_t kAll[] = {HVDS_SPARSE_AUTO,    HVDS_SPARSE_DENSE,    HVDS_SPARSE_ALLGATHER,
                                   HVDS_SPARSE_SSAR_RD, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_DSAR,
                                   HVDS_SPARSE_ZEN};

struct Outcome {
  hvds_result_t rc = HVDS_SUCCESS;
  std::string error;
};

// Runs one allreduce per rank with inputs from make(rank, &idx, &val, &nnz) and returns what
// every rank saw. Fails the test if the ranks hang (timeout) or leave messages behind.
template <typename Make>
std::vector<Outcome> run(int P, hvds_sparse_algo_t algo, const hvds_sparse_layout_t& lay,
                         hvds_reduce_op_t op, Make make,
                         const hvds_sparse_layout_t* lay_rank1 = nullptr, int pack_rank1 = 0) {
  std::vector<Outcome> out(P);
  auto world = inproc_world(P);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        std::vector<int64_t> idx;
        std::vector<float> val;
        const void* ip = nullptr;
        const void* vp = nullptr;
        size_t nnz = 0;
        make(p->rank, &idx, &val, &ip, &vp, &nnz);
        hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
        o.algorithm = algo;
        if (p->rank == 1) o.pack_indices = pack_rank1;
        hvds_sparse_result_t res{};
        const hvds_sparse_layout_t* l = p->rank == 1 && lay_rank1 ? lay_rank1 : &lay;
        out[p->rank].rc = hvds__sparse_allreduce(p, l, ip, vp, nnz, op, &o, &res);
        out[p->rank].error = p->error;
        hvds__sparse_result_free(&res);
      },
      3000);
  EXPECT_EQ(inproc_pending_messages(world.get()), 0u) << "unreceived messages";
  return out;
}

// Rank `bad` puts index `bad_index` at position 2; the others are valid.
auto one_bad_rank(int bad, int64_t bad_index) {
  return [=](int r, std::vector<int64_t>* idx, std::vector<float>* val, const void** ip,
             const void** vp, size_t* nnz) {
    *idx = {5, 1, r == bad ? bad_index : 7, 3};
    *val = {1, 2, 3, 4};
    *ip = idx->data();
    *vp = val->data();
    *nnz = idx->size();
  };
}

}  // namespace

TEST(SparseErrors, IndexOutOfRangeFailsEveryRankTheSameWay) {
  const hvds_sparse_layout_t lay = {1000, 1, HVDS_FLOAT32, HVDS_INT64};
  for (hvds_sparse_algo_t algo : kAll) {
    for (int P : {1, 3, 4, 8}) {
      int bad = P - 1;
      for (int64_t x : {int64_t{1000}, int64_t{-3}, int64_t{1} << 40}) {
        auto out = run(P, algo, lay, HVDS_SUM, one_bad_rank(bad, x));
        std::string want = "index " + std::to_string(x) + " (position 2) on rank " +
                           std::to_string(bad) + " is outside the dense shape [0, 1000)";
        for (int r = 0; r < P; r++) {
          EXPECT_EQ(out[r].rc, HVDS_INVALID_ARGUMENT) << hvds__sparse_algo_name(algo) << " P=" << P
                                                      << " rank " << r << ": " << out[r].error;
          EXPECT_NE(out[r].error.find(want), std::string::npos) << out[r].error;
          EXPECT_EQ(out[r].error, out[0].error);
        }
      }
    }
  }
}

TEST(SparseErrors, Int32IndexOutOfRange) {
  const hvds_sparse_layout_t lay = {10, 2, HVDS_FLOAT32, HVDS_INT32};
  auto out = run(3, HVDS_SPARSE_ZEN, lay, HVDS_SUM,
                 [](int r, std::vector<int64_t>*, std::vector<float>* val, const void** ip,
                    const void** vp, size_t* nnz) {
                   static const int32_t good[2] = {1, 9}, bad[2] = {1, 10};
                   val->assign(4, 1.0f);
                   *ip = r == 0 ? bad : good;
                   *vp = val->data();
                   *nnz = 2;
                 });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, HVDS_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find("index 10 (position 1) on rank 0 is outside the dense shape [0, 10)"),
              std::string::npos)
        << o.error;
  }
}

TEST(SparseErrors, NullBufferOnOneRankFailsEveryRank) {
  const hvds_sparse_layout_t lay = {100, 1, HVDS_FLOAT32, HVDS_INT64};
  auto out = run(4, HVDS_SPARSE_SSAR_SAG, lay, HVDS_SUM,
                 [](int r, std::vector<int64_t>* idx, std::vector<float>* val, const void** ip,
                    const void** vp, size_t* nnz) {
                   *idx = {1, 2};
                   *val = {1, 2};
                   *ip = idx->data();
                   *vp = r == 2 ? nullptr : val->data();
                   *nnz = 2;
                 });
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, HVDS_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find("rank 2"), std::string::npos) << o.error;
  }
}

TEST(SparseErrors, LayoutDisagreementIsAPreconditionError) {
  const hvds_sparse_layout_t lay = {100, 1, HVDS_FLOAT32, HVDS_INT64};
  const hvds_sparse_layout_t other = {101, 1, HVDS_FLOAT32, HVDS_INT64};
  for (hvds_sparse_algo_t algo : {HVDS_SPARSE_AUTO, HVDS_SPARSE_ZEN, HVDS_SPARSE_SSAR_RD}) {
    auto out = run(3, algo, lay, HVDS_SUM, one_bad_rank(-1, 0), &other);
    for (const Outcome& o : out) {
      EXPECT_EQ(o.rc, HVDS_PRECONDITION_ERROR) << o.error;
      EXPECT_NE(o.error.find("rank 1 passed a different layout"), std::string::npos) << o.error;
    }
  }
}

// pack_indices decides how streams are encoded on the wire: one rank asking otherwise fails them
// all.
TEST(SparseErrors, PackingDisagreementIsAPreconditionError) {
  const hvds_sparse_layout_t lay = {100, 1, HVDS_FLOAT32, HVDS_INT64};
  for (hvds_sparse_algo_t algo :
       {HVDS_SPARSE_AUTO, HVDS_SPARSE_ZEN, HVDS_SPARSE_SSAR_SAG, HVDS_SPARSE_SSAR_RD}) {
    for (int pack : {1, -1}) {
      auto out = run(3, algo, lay, HVDS_SUM, one_bad_rank(-1, 0), nullptr, pack);
      for (const Outcome& o : out) {
        EXPECT_EQ(o.rc, HVDS_PRECONDITION_ERROR) << o.error;
        EXPECT_NE(o.error.find("rank 1 passed a different"), std::string::npos) << o.error;
        EXPECT_NE(o.error.find("pack_indices"), std::string::npos) << o.error;
      }
    }
  }
}

TEST(SparseErrors, BadLayoutFailsBeforeAnyMessage) {
  hvds_sparse_layout_t bad_idx = {100, 1, HVDS_FLOAT32, HVDS_FLOAT32};
  hvds_sparse_layout_t zero_row = {100, 0, HVDS_FLOAT32, HVDS_INT64};
  hvds_sparse_layout_t too_big = {(size_t{1} << 31) + 1, 1, HVDS_FLOAT32, HVDS_INT32};
  for (const auto& lay : {bad_idx, zero_row, too_big}) {
    auto out = run(2, HVDS_SPARSE_AUTO, lay, HVDS_SUM, one_bad_rank(-1, 0));
    for (const Outcome& o : out) EXPECT_EQ(o.rc, HVDS_INVALID_ARGUMENT) << o.error;
  }
}

TEST(SparseErrors, NonSumOpsNeedTheDenseAlgorithm) {
  const hvds_sparse_layout_t lay = {50, 1, HVDS_FLOAT32, HVDS_INT64};
  for (hvds_sparse_algo_t algo : {HVDS_SPARSE_ALLGATHER, HVDS_SPARSE_SSAR_RD, HVDS_SPARSE_SSAR_SAG,
                                  HVDS_SPARSE_DSAR, HVDS_SPARSE_ZEN}) {
    auto out = run(3, algo, lay, HVDS_MAX, one_bad_rank(-1, 0));
    for (const Outcome& o : out) {
      EXPECT_EQ(o.rc, HVDS_NOT_SUPPORTED) << o.error;
      EXPECT_NE(o.error.find("supports only Sum and Average"), std::string::npos) << o.error;
    }
  }
  auto out = run(3, HVDS_SPARSE_AUTO, lay, HVDS_ADASUM, one_bad_rank(-1, 0));
  for (const Outcome& o : out) EXPECT_EQ(o.rc, HVDS_NOT_SUPPORTED) << o.error;
}

// Min, Max and Product reduce the dense tensors the entries describe (absent entries are zeros;
// duplicates within a rank are summed first).
TEST(SparseDenseOps, MinMaxProductOverTheDenseTensors) {
  const int P = 3;
  const hvds_sparse_layout_t lay = {6, 1, HVDS_INT32, HVDS_INT32};
  for (hvds_reduce_op_t op : {HVDS_MIN, HVDS_MAX, HVDS_PRODUCT}) {
    for (hvds_sparse_algo_t algo : {HVDS_SPARSE_AUTO, HVDS_SPARSE_DENSE}) {
      std::vector<std::vector<int32_t>> got(P);
      inproc_spawn(P, [&](hvds_p2p_t* p) {
        // Rank r: index 0 -> r + 1, index 1 -> -(r + 1) (as 1 + -(r + 2)), index r + 2 -> 2.
        int32_t idx[4] = {1, 0, static_cast<int32_t>(p->rank + 2), 1};
        int32_t val[4] = {1, p->rank + 1, 2, -(p->rank + 2)};
        hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
        o.algorithm = algo;
        got[p->rank].assign(6, 99);
        hvds_sparse_result_t res{};
        res.dense_out = got[p->rank].data();
        ASSERT_EQ(hvds__sparse_allreduce(p, &lay, idx, val, 4, op, &o, &res), HVDS_SUCCESS)
            << p->error;
        EXPECT_EQ(res.algorithm, HVDS_SPARSE_DENSE);
      });
      std::vector<int32_t> want;
      if (op == HVDS_MIN) want = {1, -3, 0, 0, 0, 0};
      if (op == HVDS_MAX) want = {3, -1, 2, 2, 2, 0};
      if (op == HVDS_PRODUCT) want = {6, -6, 0, 0, 0, 0};
      for (int r = 0; r < P; r++) EXPECT_EQ(got[r], want) << "op " << op << " rank " << r;
    }
  }
}
