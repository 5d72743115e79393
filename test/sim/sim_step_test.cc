// Training steps (presets, bucket files, the sparse selector's part) and the calibration fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "sim.h"

namespace {

hvds_sim_cfg_t defaults() {
  hvds_sim_cfg_t c;
  hvds_sim_cfg_runtime(&c);
  return c;
}

hvds_sim_net_t net25() {
  hvds_sim_net_t n = hvds_sim_net_at(25, 20e-6, 0.4e-9);
  n.overhead = 30e-6;
  return n;
}

}  // namespace

TEST(SimModel, PresetsAreDocumentedSizes) {
  ASSERT_EQ(hvds_sim_preset_count(), 4);
  const hvds_sim_model_t* lstm = hvds_sim_preset_find("lstm");
  ASSERT_NE(lstm, nullptr);
  ASSERT_EQ(lstm->n, 2);
  EXPECT_DOUBLE_EQ(lstm->b[0].elems, 20e6);
  EXPECT_DOUBLE_EQ(lstm->b[1].elems, 793471.0 * 512);
  EXPECT_DOUBLE_EQ(lstm->b[1].density, 0.0113);
  const hvds_sim_model_t* r50 = hvds_sim_preset_find("resnet50");
  ASSERT_NE(r50, nullptr);
  EXPECT_EQ(r50->n, 1);  // 102 MB fits one 128 MiB bucket
  EXPECT_DOUBLE_EQ(r50->b[0].elems, 25557032);
  // BERT's dense part splits at the fusion threshold: buckets of 32 Mi floats and a remainder.
  const hvds_sim_model_t* bert = hvds_sim_preset_find("bert");
  ASSERT_NE(bert, nullptr);
  double dense = 0;
  for (int i = 0; i < bert->n; i++) {
    if (bert->b[i].density >= 1) {
      EXPECT_LE(bert->b[i].elems * 4, double(128 << 20));
      dense += bert->b[i].elems;
    }
  }
  EXPECT_DOUBLE_EQ(dense, 335141888.0 - 30522.0 * 1024);
  EXPECT_EQ(hvds_sim_preset_find("nope"), nullptr);
  EXPECT_EQ(hvds_sim_preset(4), nullptr);
}

TEST(SimModel, ParsesBucketFiles) {
  hvds_sim_model_t m;
  char err[160];
  const char* text =
      "# name elements density\n"
      "\n"
      "fc   1e6   1\n"
      "emb  4e6   0.01 row=64 overlap=0.5 val=2 idx=8  # trailing comment\n";
  ASSERT_EQ(hvds_sim_model_parse(text, &m, err, sizeof err), 0) << err;
  ASSERT_EQ(m.n, 2);
  EXPECT_STREQ(m.b[0].name, "fc");
  EXPECT_DOUBLE_EQ(m.b[0].density, 1);
  EXPECT_DOUBLE_EQ(m.b[0].overlap, -1);
  EXPECT_DOUBLE_EQ(m.b[1].row, 64);
  EXPECT_DOUBLE_EQ(m.b[1].overlap, 0.5);
  EXPECT_DOUBLE_EQ(m.b[1].val_bytes, 2);
  EXPECT_DOUBLE_EQ(m.b[1].idx_bytes, 8);
  EXPECT_NE(hvds_sim_model_parse("a 10\n", &m, err, sizeof err), 0);
  EXPECT_NE(std::strstr(err, "line 1"), nullptr) << err;
  EXPECT_NE(hvds_sim_model_parse("a 10 1\n\nb 10 x\n", &m, err, sizeof err), 0);
  EXPECT_NE(std::strstr(err, "line 3"), nullptr) << err;
  EXPECT_NE(hvds_sim_model_parse("a 10 1 rows=3\n", &m, err, sizeof err), 0);
  EXPECT_NE(hvds_sim_model_parse("# nothing\n", &m, err, sizeof err), 0);
}

TEST(SimStep, DenseBucketsCostTheDenseAllreduce) {
  hvds_sim_cfg_t c = defaults();
  hvds_sim_net_t n = net25();
  const hvds_sim_model_t* r50 = hvds_sim_preset_find("resnet50");
  for (int P : {8, 64, 1024}) {
    hvds_sim_step_pred_t s = hvds_sim_step_predict(&n, &c, r50, P);
    EXPECT_DOUBLE_EQ(s.dense_s, s.chosen_s);
    size_t bytes = 25557032u * 4;
    double want = hvds_sim_runtime_coll(&n, &c, HVDS_SIM_ALLREDUCE, P, bytes, 4, nullptr);
    EXPECT_DOUBLE_EQ(s.dense_s, want);
  }
}

TEST(SimStep, SparseBucketsFollowTheSelector) {
  hvds_sim_cfg_t c = defaults();
  hvds_sim_net_t n = net25();
  hvds_sim_bucket_t b = {"emb", 1e8, 1e-3, 1, -1, 4, 4};
  for (int P : {8, 16, 128}) {
    hvds_sim_bucket_pred_t bp;
    hvds_sim_bucket_predict(&n, &c, &b, P, &bp);
    hvds_sparse_problem_t x = {P, 1e8, 1, 4, 4, 1e5, -1, 0, 0, 0, 0, 0, 0};
    hvds_sparse_net_t sn = {n.alpha, n.beta, 0, 0, 0, 0, 0};
    EXPECT_EQ(bp.sparse, hvds__sparse_select(&x, &sn, nullptr));
    EXPECT_NE(bp.sparse, HVDS_SPARSE_DENSE);
    EXPECT_GT(bp.chosen_s, bp.sparse_costs[bp.sparse]);  // plus the preamble and the runtime's cost
    EXPECT_LT(bp.chosen_s, bp.dense_s / 10);             // 0.1% density: far below dense
  }
  // Dense enough that the selector goes dense: the dense baseline's allreduce.
  b.density = 0.9;
  hvds_sim_bucket_pred_t bp;
  hvds_sim_bucket_predict(&n, &c, &b, 16, &bp);
  EXPECT_EQ(bp.sparse, HVDS_SPARSE_DENSE);
  EXPECT_GT(bp.chosen_s, bp.dense_s * 0.9);
}

TEST(SimStep, SparseGainShrinksWithBandwidthCost) {
  // The LSTM preset: sparse wins by more where bytes are expensive (fewer ranks).
  hvds_sim_cfg_t c = defaults();
  hvds_sim_net_t n = net25();
  const hvds_sim_model_t* lstm = hvds_sim_preset_find("lstm");
  double prev = 1e300;
  for (int P : {8, 16, 32, 64, 128}) {
    hvds_sim_step_pred_t s = hvds_sim_step_predict(&n, &c, lstm, P);
    double gain = s.dense_s / s.chosen_s;
    EXPECT_GT(gain, 1.5) << P;
    EXPECT_LT(gain, prev) << P;
    prev = gain;
  }
}

TEST(SimFit, RecoversTheParametersThatMadeTheRows) {
  hvds_sim_cfg_t c = defaults();
  hvds_sim_fit_t truth = {};
  truth.net = {8e-6, 8.5e-9, 0.4e-9, 25e-6, 1, 0.3e-9};
  truth.nP = 3;
  const int Ps[] = {2, 4, 8};
  const double alphas[] = {8e-6, 150e-6, 400e-6};  // scheduling delay grows with ranks per core
  for (int i = 0; i < 3; i++) truth.P[i] = Ps[i], truth.alpha[i] = alphas[i];
  hvds_sim_fit_opts_t f = {1024, truth.net.gamma, 2, truth.net.beta};
  hvds_sim_obs_t rows[64];
  int n = 0;
  for (int P : Ps) {
    for (size_t b : {size_t(4), size_t(1024), size_t(1) << 20, size_t(64) << 20}) {
      for (int coll : {HVDS_SIM_ALLREDUCE, HVDS_SIM_ALLGATHER}) {
        hvds_sim_obs_t& r = rows[n++];
        r = {};
        r.coll = (hvds_sim_coll_t)coll;
        r.P = P;
        r.bytes = b;
        hvds_sim_net_t at = hvds_sim_fit_net(&truth, &f, P);
        r.measured_s = hvds_sim_runtime_coll(&at, &c, r.coll, P, b, 4, nullptr);
      }
    }
  }
  hvds_sim_fit_t got;
  ASSERT_EQ(hvds_sim_fit(rows, n, &c, &f, &got), 0);
  ASSERT_EQ(got.nP, 3);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(got.P[i], Ps[i]);
    EXPECT_NEAR(got.alpha[i], alphas[i], 0.02 * alphas[i]) << Ps[i];
  }
  EXPECT_NEAR(got.net.overhead, truth.net.overhead, 0.02 * truth.net.overhead);
  EXPECT_NEAR(got.net.beta, truth.net.beta, 1e-3 * truth.net.beta);
  EXPECT_NEAR(got.net.copy, truth.net.copy, 1e-3 * truth.net.copy);
  hvds_sim_fit_predict(rows, n, &c, &f, &got);
  for (int i = 0; i < n; i++)
    EXPECT_NEAR(rows[i].predicted_s, rows[i].measured_s, 0.01 * rows[i].measured_s) << i;
  // Only one small size at the smallest P: alpha and the overhead cannot be told apart.
  EXPECT_NE(hvds_sim_fit(rows, 1, &c, &f, &got), 0);
}
