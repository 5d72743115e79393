// The personalized exchange of sparse streams (hvds__sparse_alltoall_streams, ZEN's push): every
// block arrives as its sender wrote it, plain or packed, and packed it moves fewer bytes; and
// what packed ZEN puts on the wire in all, counted by the in-process transport.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "inproc_p2p.h"
#include "sparse_internal.h"

namespace {

constexpr size_t kDim = 1 << 20;

// Rank r's block for rank j: n entries, indices ascending with gaps under 2^14 (two-byte
// varints), the float values naming sender, receiver and entry.
struct Block {
  std::vector<int32_t> idx;
  std::vector<float> val;
};

Block make_block(int r, int j, size_t n) {
  Block b;
  int64_t at = r * 7 + j;
  for (size_t e = 0; e < n; e++) {
    at += 1 + (int64_t)((e * 131 + r * 17 + j * 29) % 9000);
    b.idx.push_back((int32_t)at);
    b.val.push_back((float)(r * 1000000 + j * 10000 + e));
  }
  return b;
}

size_t entries(int r, int j) { return j == 2 ? 0 : 100 + 37 * r + 11 * j; }  // rank 2 gets none

struct Outcome {
  hvds_result_t rc = HVDS_SUCCESS;
  std::string error;
  size_t sent = 0;
};

// Runs the exchange on P ranks with c->packed = packed; checks every received block.
std::vector<Outcome> exchange(int P, int packed) {
  std::vector<Outcome> out(P);
  hvds_sparse_layout_t lay = {kDim, 1, HVDS_FLOAT32, HVDS_INT32};
  inproc_spawn(
      P,
      [&](hvds_p2p_t* p) {
        int r = p->rank;
        std::vector<size_t> soff(P), sbytes(P), roff(P), rbytes(P);
        std::vector<uint64_t> scount(P), rcount(P);
        size_t total = 0;
        for (int j = 0; j < P; j++) {
          scount[j] = entries(r, j);
          soff[j] = total;
          sbytes[j] = hvds__sstream_bytes(&lay, scount[j], 0);
          total += sbytes[j];
        }
        std::vector<char> sbuf(total + 8, 0);
        for (int j = 0; j < P; j++) {
          Block b = make_block(r, j, scount[j]);
          hvds_sstream_t view;
          hvds__sstream_view(&lay, sbuf.data() + soff[j], 0, kDim, scount[j], 0, &view);
          for (size_t e = 0; e < scount[j]; e++) {
            hvds__sparse_idx_set(&lay, view.base, e, b.idx[e]);
            std::memcpy(hvds__sstream_val(&lay, &view) + e * 4, &b.val[e], 4);
          }
        }
        hvds_sparse_ctx_t c = {};
        c.p = p;
        c.lay = lay;
        c.tag = 11;
        c.packed = packed;
        char* rbuf = nullptr;
        Outcome& o = out[r];
        o.rc = hvds__sparse_alltoall_streams(&c, nullptr, P, r, sbuf.data(), soff.data(),
                                             sbytes.data(), scount.data(), &rbuf, roff.data(),
                                             rbytes.data(), rcount.data(), &o.sent);
        o.error = p->error;
        for (int j = 0; o.rc == HVDS_SUCCESS && j < P; j++) {
          Block want = make_block(j, r, entries(j, r));
          ASSERT_EQ(rcount[j], want.idx.size()) << "rank " << r << " from " << j;
          ASSERT_EQ(rbytes[j], hvds__sstream_bytes(&lay, rcount[j], 0));
          hvds_sstream_t got;
          hvds__sstream_view(&lay, rbuf + roff[j], 0, kDim, rcount[j], 0, &got);
          for (size_t e = 0; e < rcount[j]; e++) {
            ASSERT_EQ(hvds__sstream_index(&lay, &got, e), want.idx[e]) << r << " from " << j;
            float v;
            std::memcpy(&v, hvds__sstream_val(&lay, &got) + e * 4, 4);
            ASSERT_EQ(v, want.val[e]) << "rank " << r << " from " << j << " entry " << e;
          }
        }
        hvds__sparse_buf_free(rbuf);
      },
      10000);
  return out;
}

TEST(SparseAlltoallStreams, EveryBlockArrivesAsSentPlainAndPacked) {
  for (int P : {1, 2, 3, 5}) {
    for (int packed : {0, 1}) {
      for (const Outcome& o : exchange(P, packed))
        ASSERT_EQ(o.rc, HVDS_SUCCESS) << "P " << P << " packed " << packed << ": " << o.error;
    }
  }
}

// Four bytes of index against one or two of gap: a packed entry is at most 6 bytes of 8, plus
// each block's 16-byte head and padding.
TEST(SparseAlltoallStreams, PackedBlocksMoveFewerBytes) {
  const int P = 5;
  std::vector<Outcome> plain = exchange(P, 0), packed = exchange(P, 1);
  hvds_sparse_layout_t lay = {kDim, 1, HVDS_FLOAT32, HVDS_INT32};
  for (int r = 0; r < P; r++) {
    size_t n = 0, as_is = 0;  // as_is: the blocks in the stream layout, each half padded to 8
    for (int j = 0; j < P; j++) {
      n += j != r ? entries(r, j) : 0;
      as_is += j != r ? hvds__sstream_bytes(&lay, entries(r, j), 0) : 0;
    }
    EXPECT_EQ(plain[r].sent, as_is) << "rank " << r;
    EXPECT_LE(packed[r].sent, n * 6 + (P - 1) * 32) << "rank " << r;
    EXPECT_LT(packed[r].sent, plain[r].sent * 4 / 5) << "rank " << r;
  }
}

// ZEN packed, end to end, on supports that fix every gap: every rank holds the same lattice of
// k indices 200 apart, so the push's blocks (about k / P of them, hashed to each owner) and the
// pull's partitions have gaps of 200 to 16383, two bytes each, plus 4 of value. The whole job's
// bytes on the wire stay under 6 bytes an entry sent, the blocks' heads and the small exchanges
// (counts, the preamble); with the push's indices at full width they would be 73 KB over it.
TEST(SparseAlltoallStreams, ZenPackedPushAndPullTakeSixBytesAnEntry) {
  const int P = 8;
  const size_t dim = 1 << 20, k = 5200;
  auto world = inproc_world(P);
  std::vector<hvds_result_t> rc(P, HVDS_INTERNAL_ERROR);
  std::vector<size_t> nnz(P, 0);
  inproc_spawn(
      world,
      [&](hvds_p2p_t* p) {
        std::vector<int32_t> idx;
        std::vector<float> val(k, 1.0f);
        for (size_t i = 0; i < k; i++) idx.push_back((int32_t)(7 + 200 * i));
        hvds_sparse_layout_t lay = {dim, 1, HVDS_FLOAT32, HVDS_INT32};
        hvds_sparse_opts_t o = HVDS_SPARSE_OPTS_INIT;
        o.tag = 5;
        o.algorithm = HVDS_SPARSE_ZEN;
        o.pack_indices = 1;
        hvds_sparse_result_t res{};
        rc[p->rank] =
            hvds__sparse_allreduce(p, &lay, idx.data(), val.data(), k, HVDS_SUM, &o, &res);
        nnz[p->rank] = res.nnz;
        hvds__sparse_result_free(&res);
      },
      10000);
  for (int r = 0; r < P; r++) {
    ASSERT_EQ(rc[r], HVDS_SUCCESS) << "rank " << r;
    ASSERT_EQ(nnz[r], k) << "rank " << r;
  }
  double push = P * (k * 6.0 + 32 * P), pull = (P - 1) * (k * 6.0 + 32 * P);
  double small = 64.0 * P * P + 4096;
  EXPECT_LE((double)inproc_bytes_sent(world.get()), push + pull + small)
      << "push bound " << push << ", pull bound " << pull;
}

}  // namespace
