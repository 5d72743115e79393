// Every kernel of cuda/ against the CPU implementation in ops/: reduce, scale and the casts
// against ops/reduce.c; pack/unpack against runtime/execute.c's memcpy + hvds__scale; non-zero
// compaction, ZEN's partition and bitmap, scatter and gather against ops/sparse/ (the hash, the
// stream functions, and zen.c's block format). Needs a GPU (make test-gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>

#include "gpu_util.h"
#include "hvds_cuda.h"
#include "sparse_stream.h"
#include "zen_hash.h"

using namespace hvds_gpu_test;

namespace {

const hvds_dtype_t kAllTypes[] = {HVDS_UINT8,   HVDS_INT8,  HVDS_UINT16,  HVDS_INT16,
                                  HVDS_INT32,   HVDS_INT64, HVDS_FLOAT16, HVDS_FLOAT32,
                                  HVDS_FLOAT64, HVDS_BOOL,  HVDS_BFLOAT16};

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(device_count(), 0) << "these tests need a CUDA device"; }
};

// ---- Element-wise ----

TEST_F(GpuKernels, ReduceEqualsOpsForEveryDtypeAndOp) {
  const hvds_reduce_op_t ops[] = {HVDS_SUM,     HVDS_AVERAGE,     HVDS_MIN,       HVDS_MAX,
                                  HVDS_PRODUCT, HVDS_REDUCE_BAND, HVDS_REDUCE_BOR};
  std::mt19937 rng(1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000003}}) {
    for (hvds_dtype_t t : kAllTypes) {
      for (hvds_reduce_op_t op : ops) {
        std::vector<uint8_t> a = random_elems(t, n, rng), b = random_elems(t, n, rng), want = a;
        hvds_result_t cpu = hvds__reduce(want.data(), b.data(), n, t, op);
        DeviceBuf da(a), db(b);
        hvds_result_t gpu = hvds__cuda_reduce(da.get(), db.get(), n, t, op, nullptr);
        ASSERT_EQ(gpu, cpu) << "dtype " << t << " op " << op;
        if (cpu != HVDS_SUCCESS) continue;
        ASSERT_TRUE(same_elems(t, da.download(), want)) << "dtype " << t << " op " << op;
      }
    }
  }
}

TEST_F(GpuKernels, ReduceInPlace) {
  std::mt19937 rng(2);
  std::vector<uint8_t> a = random_elems(HVDS_INT32, 5000, rng), copy = a, want = a;
  ASSERT_EQ(hvds__reduce(want.data(), copy.data(), 5000, HVDS_INT32, HVDS_SUM), HVDS_SUCCESS);
  DeviceBuf d(a);
  ASSERT_EQ(hvds__cuda_reduce(d.get(), d.get(), 5000, HVDS_INT32, HVDS_SUM, nullptr), HVDS_SUCCESS);
  EXPECT_EQ(d.download(), want);
}

TEST_F(GpuKernels, ScaleEqualsOps) {
  std::mt19937 rng(3);
  for (hvds_dtype_t t : kAllTypes) {
    for (double f : {1.0, 0.5, -1.5, 1.0 / 3.0, 1e10, 0.0, (double)NAN}) {
      std::vector<uint8_t> want = random_elems(t, 300007, rng);
      DeviceBuf d(want);
      ASSERT_EQ(hvds__scale(want.data(), want.size() / hvds__dtype_bytes(t), t, f), HVDS_SUCCESS);
      ASSERT_EQ(hvds__cuda_scale(d.get(), want.size() / hvds__dtype_bytes(t), t, f, nullptr),
                HVDS_SUCCESS);
      ASSERT_TRUE(same_elems(t, d.download(), want)) << "dtype " << t << " factor " << f;
    }
  }
}

TEST_F(GpuKernels, CastsEqualOpsBitForBit) {
  std::vector<uint16_t> halves(65536);
  std::iota(halves.begin(), halves.end(), 0);
  std::mt19937 rng(4);
  std::vector<uint32_t> floats(2000000);
  for (auto& f : floats) f = rng();
  for (uint16_t h : halves) floats.push_back((uint32_t)h << 16);  // bf16 values exactly
  for (hvds_dtype_t t : {HVDS_FLOAT16, HVDS_BFLOAT16}) {
    auto widen = t == HVDS_FLOAT16 ? hvds__half_to_float : hvds__bf16_to_float;
    auto narrow = t == HVDS_FLOAT16 ? hvds__float_to_half : hvds__float_to_bf16;
    DeviceBuf dh(halves), dw(halves.size() * 4);
    ASSERT_EQ(hvds__cuda_cast(dh.get(), t, dw.get(), HVDS_FLOAT32, halves.size(), nullptr),
              HVDS_SUCCESS);
    std::vector<uint32_t> got = dw.download_as<uint32_t>(halves.size());
    for (size_t i = 0; i < halves.size(); i++) {
      float w = widen(halves[i]);
      uint32_t wb;
      memcpy(&wb, &w, 4);
      ASSERT_EQ(got[i], wb) << "dtype " << t << " value " << i;
    }
    DeviceBuf df(floats), dn(floats.size() * 2);
    ASSERT_EQ(hvds__cuda_cast(df.get(), HVDS_FLOAT32, dn.get(), t, floats.size(), nullptr),
              HVDS_SUCCESS);
    std::vector<uint16_t> gotn = dn.download_as<uint16_t>(floats.size());
    for (size_t i = 0; i < floats.size(); i++) {
      float f;
      memcpy(&f, &floats[i], 4);
      ASSERT_EQ(gotn[i], narrow(f)) << "dtype " << t << " float bits " << std::hex << floats[i];
    }
  }
  EXPECT_EQ(hvds__cuda_cast(nullptr, HVDS_INT32, nullptr, HVDS_FLOAT32, 1, nullptr),
            HVDS_NOT_SUPPORTED);
}

// ---- Fusion buffer ----

TEST_F(GpuKernels, PackUnpackEqualExecuteCMemcpyAndScale) {
  std::mt19937 rng(5);
  for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT16, HVDS_INT64, HVDS_UINT8, HVDS_BFLOAT16}) {
    for (double f : {1.0, 0.25}) {
      size_t esz = hvds__dtype_bytes(t);
      const int n = 150;  // more than one launch of 64
      std::vector<std::vector<uint8_t>> host(n);
      std::vector<std::unique_ptr<DeviceBuf>> dev(n);
      std::vector<hvds_cuda_buf_t> bufs(n);
      size_t total = 0;
      for (int i = 0; i < n; i++) {
        size_t count = i % 10 == 0 ? 0 : rng() % (i % 3 == 0 ? 70000 : 300);
        host[i] = random_elems(t, count, rng);
        dev[i].reset(new DeviceBuf(host[i]));
        bufs[i] = {i % 17 == 5 ? nullptr : dev[i]->get(), count};  // some joined (zeros)
        total += count;
      }
      // CPU: runtime/execute.c packs with memcpy (zeros for joined) then scales the buffer.
      std::vector<uint8_t> want(total * esz, 0);
      size_t off = 0;
      for (int i = 0; i < n; i++) {
        if (bufs[i].data) memcpy(&want[off], host[i].data(), host[i].size());
        off += bufs[i].count * esz;
      }
      ASSERT_EQ(hvds__scale(want.data(), total, t, f), HVDS_SUCCESS);
      DeviceBuf fused(total * esz);
      ASSERT_EQ(hvds__cuda_pack(bufs.data(), n, fused.get(), t, f, nullptr), HVDS_SUCCESS);
      ASSERT_TRUE(same_elems(t, fused.download(), want)) << "pack dtype " << t << " f " << f;
      // Unpack into fresh tensors with the factor again.
      std::vector<std::unique_ptr<DeviceBuf>> outs(n);
      std::vector<hvds_cuda_buf_t> obufs(n);
      for (int i = 0; i < n; i++) {
        outs[i].reset(new DeviceBuf(bufs[i].count * esz));
        obufs[i] = {outs[i]->get(), bufs[i].count};
      }
      ASSERT_EQ(hvds__cuda_unpack(fused.get(), obufs.data(), n, t, f, nullptr), HVDS_SUCCESS);
      off = 0;
      for (int i = 0; i < n; i++) {
        std::vector<uint8_t> w(want.begin() + off, want.begin() + off + bufs[i].count * esz);
        ASSERT_EQ(hvds__scale(w.data(), bufs[i].count, t, f), HVDS_SUCCESS);
        ASSERT_TRUE(same_elems(t, outs[i]->download(), w)) << "unpack tensor " << i;
        off += bufs[i].count * esz;
      }
    }
  }
}

// ---- Non-zero extraction ----

// A dense tensor with about density of its rows non-zero (rows of row values).
std::vector<uint8_t> sparse_dense(hvds_dtype_t t, size_t dim, size_t row, double density,
                                  std::mt19937& rng) {
  size_t esz = hvds__dtype_bytes(t);
  std::vector<uint8_t> v(dim * row * esz, 0);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t r = 0; r < dim; r++) {
    if (u(rng) >= density) continue;
    size_t j = rng() % row;  // one non-zero value somewhere in the row; others random or 0
    for (size_t k = 0; k < row; k++) {
      uint8_t* e = &v[(r * row + k) * esz];
      if (k != j && rng() % 2) continue;
      do {
        for (size_t b = 0; b < esz; b++) e[b] = (uint8_t)rng();
        if (t == HVDS_BOOL) e[0] = 1;
      } while (elem_as_double(t, e) == 0 && t != HVDS_BOOL && t != HVDS_INT32 && t != HVDS_INT64);
      if ((t == HVDS_INT32 || t == HVDS_INT64) &&
          std::all_of(e, e + esz, [](uint8_t b) { return !b; }))
        e[0] = 1;
    }
    if (rng() % 16 == 0 && (t == HVDS_FLOAT32)) {  // a -0.0 row: zero in value
      for (size_t k = 0; k < row; k++) {
        float m = -0.0f;
        memcpy(&v[(r * row + k) * esz], &m, 4);
      }
    }
  }
  return v;
}

bool row_nonzero(hvds_dtype_t t, const uint8_t* p, size_t row) {
  size_t esz = hvds__dtype_bytes(t);
  for (size_t k = 0; k < row; k++) {
    const uint8_t* e = p + k * esz;
    bool nz = (t == HVDS_FLOAT16 || t == HVDS_BFLOAT16 || t == HVDS_FLOAT32 || t == HVDS_FLOAT64)
                  ? !(elem_as_double(t, e) == 0)
                  : std::any_of(e, e + esz, [](uint8_t b) { return b != 0; });
    if (nz) return true;
  }
  return false;
}

TEST_F(GpuKernels, NonzeroCompactionEqualsCpuScan) {
  std::mt19937 rng(6);
  for (hvds_dtype_t t : {HVDS_FLOAT32, HVDS_FLOAT16, HVDS_INT64, HVDS_BOOL}) {
    for (size_t row : {size_t{1}, size_t{3}, size_t{64}}) {
      for (size_t dim : {size_t{0}, size_t{1}, size_t{2047}, size_t{2048}, size_t{300001}}) {
        for (double density : {0.0, 0.01, 0.5, 1.0}) {
          for (hvds_dtype_t it : {HVDS_INT32, HVDS_INT64}) {
            if (row == 64 && dim > 100000) continue;  // keep the test short
            hvds_sparse_layout_t lay = {dim, row, t, it};
            std::vector<uint8_t> dense = sparse_dense(t, dim, row, density, rng);
            size_t esz = hvds__dtype_bytes(t), isz = it == HVDS_INT32 ? 4 : 8;
            std::vector<int64_t> want_idx;
            std::vector<uint8_t> want_vals;
            for (size_t r = 0; r < dim; r++) {
              const uint8_t* p = &dense[r * row * esz];
              if (!row_nonzero(t, p, row)) continue;
              want_idx.push_back((int64_t)r);
              want_vals.insert(want_vals.end(), p, p + row * esz);
            }
            DeviceBuf dd(dense), ws(hvds__cuda_nonzero_workspace(&lay)), count(8);
            ASSERT_EQ(hvds__cuda_nonzero_count(&lay, dd.get(), count.as<uint64_t>(), ws.get(),
                                               ws.bytes(), nullptr),
                      HVDS_SUCCESS);
            ASSERT_EQ(count.download_as<uint64_t>(1)[0], want_idx.size());
            size_t cap = want_idx.size();
            DeviceBuf di(cap * isz), dv(cap * row * esz);
            ASSERT_EQ(
                hvds__cuda_nonzero_compact(&lay, dd.get(), cap, di.get(), dv.get(),
                                           count.as<uint64_t>(), ws.get(), ws.bytes(), nullptr),
                HVDS_SUCCESS);
            ASSERT_EQ(count.download_as<uint64_t>(1)[0], want_idx.size());
            std::vector<uint8_t> gi = di.download();
            for (size_t e = 0; e < cap; e++)
              ASSERT_EQ(hvds__sparse_idx_get(&lay, gi.data(), e), want_idx[e]) << e;
            ASSERT_EQ(dv.download(), want_vals)
                << "dtype " << t << " row " << row << " dim " << dim << " density " << density;
          }
        }
      }
    }
  }
}

TEST_F(GpuKernels, NonzeroCompactionStopsAtCapacity) {
  hvds_sparse_layout_t lay = {10000, 1, HVDS_FLOAT32, HVDS_INT64};
  std::vector<float> dense(10000, 1.0f);
  DeviceBuf dd(dense), ws(hvds__cuda_nonzero_workspace(&lay)), count(8), di(100 * 8 + 64),
      dv(100 * 4 + 64);
  CUDA_OK(cudaMemset(di.get(), 0xff, di.bytes()));
  ASSERT_EQ(hvds__cuda_nonzero_compact(&lay, dd.get(), 100, di.get(), dv.get(),
                                       count.as<uint64_t>(), ws.get(), ws.bytes(), nullptr),
            HVDS_SUCCESS);
  EXPECT_EQ(count.download_as<uint64_t>(1)[0], 10000u);
  std::vector<int64_t> idx = di.download_as<int64_t>(101);
  for (int e = 0; e < 100; e++) EXPECT_EQ(idx[e], e);
  EXPECT_EQ(idx[100], -1);  // nothing past the capacity
  EXPECT_EQ(hvds__cuda_nonzero_compact(&lay, dd.get(), 100, di.get(), dv.get(),
                                       count.as<uint64_t>(), ws.get(), 1, nullptr),
            HVDS_INVALID_ARGUMENT);
}

// ---- ZEN ----

// n random indices of [0, dim) (duplicates when dup) and rows of random values.
void random_entries(const hvds_sparse_layout_t& lay, size_t n, bool dup, std::mt19937_64& rng,
                    std::vector<uint8_t>* idx, std::vector<uint8_t>* vals) {
  size_t isz = lay.index_dtype == HVDS_INT32 ? 4 : 8;
  idx->assign(n * isz, 0);
  std::vector<uint64_t> pool;
  if (!dup) {
    std::vector<uint64_t> all(lay.dim);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    pool.assign(all.begin(), all.begin() + n);
  }
  for (size_t i = 0; i < n; i++)
    hvds__sparse_idx_set(&lay, idx->data(), i, (int64_t)(dup ? rng() % lay.dim : pool[i]));
  std::mt19937 r32((uint32_t)rng());
  *vals = random_elems(lay.dtype, n * lay.row, r32);
}

TEST_F(GpuKernels, ZenPartitionEqualsStableSortByOpsOwner) {
  std::mt19937_64 rng(7);
  for (int P : {1, 2, 3, 8, 64, 1000}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{150000}}) {
      for (size_t row : {size_t{1}, size_t{4}}) {
        hvds_dtype_t it = n % 2 ? HVDS_INT32 : HVDS_INT64;
        hvds_sparse_layout_t lay = {1u << 20, row, HVDS_FLOAT32, it};
        hvds_zen_hash_t h;
        hvds__zen_hash_init(&h, lay.dim, rng());
        std::vector<uint8_t> idx, vals;
        random_entries(lay, n, true, rng, &idx, &vals);
        // Reference: owners by ops/sparse/zen_hash.c, stable by input order (zen.c's partition).
        std::vector<int> owner(n);
        for (size_t i = 0; i < n; i++)
          owner[i] = hvds__zen_owner(
              lay.dim, P, hvds__zen_hash(&h, (uint64_t)hvds__sparse_idx_get(&lay, idx.data(), i)));
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return owner[a] < owner[b]; });
        size_t isz = it == HVDS_INT32 ? 4 : 8, rb = row * 4;
        std::vector<uint8_t> want_idx(n * isz), want_vals(n * rb);
        std::vector<uint64_t> want_off(P + 1, 0);
        for (size_t t = 0; t < n; t++) {
          memcpy(&want_idx[t * isz], &idx[order[t] * isz], isz);
          memcpy(&want_vals[t * rb], &vals[order[t] * rb], rb);
          want_off[owner[order[t]] + 1]++;
        }
        for (int j = 0; j < P; j++) want_off[j + 1] += want_off[j];
        DeviceBuf di(idx), dv(vals), oi(idx.size()), ov(vals.size()), off((P + 1) * 8),
            ws(hvds__cuda_zen_partition_workspace(&lay, n, P));
        ASSERT_EQ(hvds__cuda_zen_partition(&h, P, &lay, di.get(), dv.get(), n, oi.get(), ov.get(),
                                           off.as<uint64_t>(), ws.get(), ws.bytes(), nullptr),
                  HVDS_SUCCESS);
        ASSERT_EQ(off.download_as<uint64_t>(P + 1), want_off) << "P " << P << " n " << n;
        ASSERT_EQ(oi.download(), want_idx) << "P " << P << " n " << n << " row " << row;
        ASSERT_EQ(ov.download(), want_vals) << "P " << P << " n " << n << " row " << row;
      }
    }
  }
}

TEST_F(GpuKernels, ZenBitmapEncodeDecodeEqualZenFormat) {
  std::mt19937_64 rng(8);
  for (size_t row : {size_t{1}, size_t{5}}) {
    for (int P : {1, 3, 16}) {
      hvds_sparse_layout_t lay = {200003, row, HVDS_FLOAT32, HVDS_INT64};
      hvds_zen_hash_t h;
      hvds__zen_hash_init(&h, lay.dim, rng());
      for (int j = 0; j < P; j++) {
        uint64_t lo = hvds__sparse_part_lo(0, lay.dim, P, j);
        uint64_t len = hvds__sparse_part_lo(0, lay.dim, P, j + 1) - lo;
        // Owner j's partition: sorted unique indices hashing into its range.
        std::vector<int64_t> idx;
        for (uint64_t x = 0; x < lay.dim; x++) {
          uint64_t y = hvds__zen_hash(&h, x);
          if (y >= lo && y < lo + len && rng() % 3 == 0) idx.push_back((int64_t)x);
        }
        size_t n = idx.size(), rb = row * 4;
        std::mt19937 r32((uint32_t)rng());
        std::vector<uint8_t> vals = random_elems(HVDS_FLOAT32, n * row, r32);
        // zen.c's encode_bitmap: bit y - lo, LSB first; rows in hashed order.
        size_t mapb = hvds__cuda_bitmap_bytes(len);
        ASSERT_EQ(mapb, hvds__pad8((len + 7) / 8));
        std::vector<uint8_t> want_map(mapb, 0), want_vals(n * rb);
        std::vector<std::pair<uint64_t, size_t>> key(n);
        for (size_t i = 0; i < n; i++) key[i] = {hvds__zen_hash(&h, (uint64_t)idx[i]) - lo, i};
        std::sort(key.begin(), key.end());
        for (size_t t = 0; t < n; t++) {
          want_map[key[t].first >> 3] |= (uint8_t)(1u << (key[t].first & 7));
          memcpy(&want_vals[t * rb], &vals[key[t].second * rb], rb);
        }
        DeviceBuf di(idx), dv(vals), map(mapb), ov(n * rb),
            ws(hvds__cuda_bitmap_workspace(&lay, len, n));
        ASSERT_EQ(hvds__cuda_bitmap_encode(&h, &lay, lo, len, di.get(), dv.get(), n, map.get(),
                                           ov.get(), ws.get(), ws.bytes(), nullptr),
                  HVDS_SUCCESS);
        ASSERT_EQ(map.download(), want_map) << "P " << P << " owner " << j;
        ASSERT_EQ(ov.download(), want_vals) << "P " << P << " owner " << j;
        // zen.c's collect: set bits in order, index = inverse hash; rows as received.
        std::vector<int64_t> want_didx(n);
        for (size_t t = 0; t < n; t++) want_didx[t] = idx[key[t].second];
        std::vector<uint8_t> dense0(lay.dim * rb, 0);
        hvds_sstream_t s;  // the sorted stream, scattered by ops as the dense reference
        ASSERT_EQ(hvds__sstream_alloc(&lay, 0, lay.dim, n, 0, &s), HVDS_SUCCESS);
        for (size_t i = 0; i < n; i++) {
          hvds__sparse_idx_set(&lay, s.base, i, idx[i]);
          memcpy(hvds__sstream_val(&lay, &s) + i * rb, &vals[i * rb], rb);
        }
        std::vector<uint8_t> want_dense(lay.dim * rb);
        hvds__sstream_to_dense(&lay, &s, want_dense.data());
        hvds__sstream_free(&s);
        DeviceBuf oidx(n * 8), dense(dense0);
        ASSERT_EQ(hvds__cuda_bitmap_decode(&h, &lay, lo, len, map.get(), ov.get(), n, oidx.get(),
                                           dense.get(), ws.get(), ws.bytes(), nullptr),
                  HVDS_SUCCESS);
        ASSERT_EQ(oidx.download_as<int64_t>(n), want_didx);
        ASSERT_EQ(dense.download(), want_dense);
      }
    }
  }
}

// ---- Scatter and gather ----

TEST_F(GpuKernels, ScatterCopyAndAddEqualStreamFunctions) {
  std::mt19937_64 rng(9);
  for (hvds_dtype_t t : kAllTypes) {
    for (size_t row : {size_t{1}, size_t{7}}) {
      hvds_sparse_layout_t lay = {50021, row, t, HVDS_INT32};
      size_t n = 20000, rb = row * hvds__dtype_bytes(t);
      std::vector<uint8_t> idx, vals;
      random_entries(lay, n, false, rng, &idx, &vals);
      // Sorted stream for the CPU functions.
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return hvds__sparse_idx_get(&lay, idx.data(), a) <
               hvds__sparse_idx_get(&lay, idx.data(), b);
      });
      hvds_sstream_t s;
      ASSERT_EQ(hvds__sstream_alloc(&lay, 0, lay.dim, n, 0, &s), HVDS_SUCCESS);
      for (size_t i = 0; i < n; i++) {
        hvds__sparse_idx_set(&lay, s.base, i, hvds__sparse_idx_get(&lay, idx.data(), order[i]));
        memcpy(hvds__sstream_val(&lay, &s) + i * rb, &vals[order[i] * rb], rb);
      }
      std::vector<uint8_t> want_copy(lay.dim * rb);
      hvds__sstream_to_dense(&lay, &s, want_copy.data());
      std::mt19937 r32((uint32_t)rng());
      std::vector<uint8_t> acc = random_elems(t, lay.dim * row, r32), want_add = acc;
      hvds__sstream_add_into(&lay, (char*)want_add.data(), &s);
      hvds__sstream_free(&s);
      DeviceBuf di(idx), dv(vals), dcopy(std::vector<uint8_t>(lay.dim * rb, 0)), dadd(acc);
      ASSERT_EQ(hvds__cuda_scatter(&lay, di.get(), dv.get(), n, dcopy.get(), HVDS_CUDA_SCATTER_COPY,
                                   nullptr),
                HVDS_SUCCESS);
      ASSERT_EQ(dcopy.download(), want_copy) << "dtype " << t;
      ASSERT_EQ(hvds__cuda_scatter(&lay, di.get(), dv.get(), n, dadd.get(), HVDS_CUDA_SCATTER_ADD,
                                   nullptr),
                HVDS_SUCCESS);
      ASSERT_TRUE(same_elems(t, dadd.download(), want_add)) << "dtype " << t << " row " << row;
      // Gather back the rows just scattered.
      DeviceBuf back(n * rb);
      ASSERT_EQ(hvds__cuda_gather_rows(&lay, dcopy.get(), di.get(), n, back.get(), nullptr),
                HVDS_SUCCESS);
      ASSERT_EQ(back.download(), vals);
    }
  }
}

TEST_F(GpuKernels, AtomicScatterAddSumsDuplicates) {
  std::mt19937_64 rng(10);
  for (hvds_dtype_t t : {HVDS_INT32, HVDS_INT64, HVDS_FLOAT32, HVDS_FLOAT64}) {
    hvds_sparse_layout_t lay = {1000, 3, t, HVDS_INT64};
    size_t n = 100000, esz = hvds__dtype_bytes(t);
    std::vector<uint8_t> idx, vals(n * 3 * esz);
    random_entries(lay, n, true, rng, &idx, &vals);
    for (size_t k = 0; k < n * 3; k++) {  // small integers: every sum is exact
      int v = (int)(rng() % 201) - 100;
      if (t == HVDS_INT32) ((int32_t*)vals.data())[k] = v;
      if (t == HVDS_INT64) ((int64_t*)vals.data())[k] = v;
      if (t == HVDS_FLOAT32) ((float*)vals.data())[k] = (float)v;
      if (t == HVDS_FLOAT64) ((double*)vals.data())[k] = v;
    }
    std::vector<uint8_t> want(lay.dim * 3 * esz, 0);
    for (size_t i = 0; i < n; i++) {
      int64_t r = hvds__sparse_idx_get(&lay, idx.data(), i);
      ASSERT_EQ(hvds__reduce(&want[r * 3 * esz], &vals[i * 3 * esz], 3, t, HVDS_SUM), HVDS_SUCCESS);
    }
    DeviceBuf di(idx), dv(vals), dense(std::vector<uint8_t>(want.size(), 0));
    ASSERT_EQ(hvds__cuda_scatter(&lay, di.get(), dv.get(), n, dense.get(),
                                 HVDS_CUDA_SCATTER_ADD_ATOMIC, nullptr),
              HVDS_SUCCESS);
    ASSERT_EQ(dense.download(), want) << "dtype " << t;
  }
  hvds_sparse_layout_t lay16 = {10, 1, HVDS_INT16, HVDS_INT32};
  EXPECT_EQ(hvds__cuda_scatter(&lay16, nullptr, nullptr, 0, nullptr, HVDS_CUDA_SCATTER_ADD_ATOMIC,
                               nullptr),
            HVDS_NOT_SUPPORTED);
}

}  // namespace
