// The NCCL backend (ops/nccl/) with ranks as threads, one GPU each, the unique id broadcast over
// the in-process transport of test/ops: every collective against a CPU reference built with
// ops/reduce.c, at np 1 and, with two or more GPUs, at np = GPUs (up to 4). NCCL refuses two
// ranks of one communicator on the same GPU, so one GPU runs np 1 only (said in the output).
// Data are small integers, so every reduction order gives the same bits. Needs a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <numeric>

#include "gpu_util.h"
#include "inproc_p2p.h"
#include "nccl_backend.h"

using namespace hvds_gpu_test;

namespace {

std::vector<int> nps() {
  int ndev = device_count();
  std::vector<int> v = {1};
  if (ndev >= 2) v.push_back(std::min(ndev, 4));
  return v;
}

// One rank's objects, made and destroyed by run_ranks.
struct Rank {
  hvds_p2p_t* p;
  hvds_nccl_ctx_t* ctx;
  hvds_nccl_comm_t* comm;
  int rank, size;
};

void run_ranks(int np, const std::function<void(Rank&)>& fn) {
  inproc_spawn(np, [&](hvds_p2p_t* p) {
    Rank r{p, nullptr, nullptr, p->rank, p->size};
    ASSERT_EQ(hvds__nccl_ctx_create(p->rank, 60000, &r.ctx), HVDS_SUCCESS);
    ASSERT_EQ(hvds__nccl_comm_create_p2p(r.ctx, p, 7, &r.comm), HVDS_SUCCESS);
    fn(r);
    hvds__nccl_ctx_sync(r.ctx);
    hvds__nccl_comm_destroy(r.comm);
    hvds__nccl_ctx_destroy(r.ctx);
  });
}

// Counts callbacks and remembers the first failure.
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  hvds_result_t first = HVDS_SUCCESS;
  std::string msg;
  static void cb(void* arg, hvds_result_t st, const char* m) {
    Done* d = static_cast<Done*>(arg);
    std::lock_guard<std::mutex> lock(d->mu);
    if (st != HVDS_SUCCESS && d->first == HVDS_SUCCESS) d->first = st, d->msg = m;
    d->calls++;
    d->cv.notify_all();
  }
  hvds_nccl_call_t call() { return hvds_nccl_call_t{nullptr, 0, &Done::cb, this}; }
  void wait(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return calls >= n; });
  }
};

// Rank r's element i as a small integer in dtype t (exact in every dtype).
std::vector<uint8_t> rank_input(hvds_dtype_t t, size_t n, int r) {
  size_t esz = hvds__dtype_bytes(t);
  std::vector<uint8_t> v(n * esz);
  for (size_t i = 0; i < n; i++) {
    int x = (int)((i * 7 + (size_t)r * 13) % 11) - (t == HVDS_UINT8 ? 0 : 5);
    if (t == HVDS_BOOL) x = (int)((i + (size_t)r) % 3 == 0);
    uint8_t* e = &v[i * esz];
    switch (t) {
      case HVDS_UINT8:
      case HVDS_BOOL:
        *e = (uint8_t)x;
        break;
      case HVDS_INT8:
        *(int8_t*)e = (int8_t)x;
        break;
      case HVDS_INT32: {
        int32_t y = x;
        memcpy(e, &y, 4);
        break;
      }
      case HVDS_INT64: {
        int64_t y = x;
        memcpy(e, &y, 8);
        break;
      }
      case HVDS_FLOAT16: {
        uint16_t y = hvds__float_to_half((float)x);
        memcpy(e, &y, 2);
        break;
      }
      case HVDS_BFLOAT16: {
        uint16_t y = hvds__float_to_bf16((float)x);
        memcpy(e, &y, 2);
        break;
      }
      case HVDS_FLOAT32: {
        float y = (float)x;
        memcpy(e, &y, 4);
        break;
      }
      case HVDS_FLOAT64: {
        double y = x;
        memcpy(e, &y, 8);
        break;
      }
      default:
        break;
    }
  }
  return v;
}

// The CPU reference of one allreduce: every rank's input times prescale, reduced in rank
// order with ops/reduce.c, times postscale (and 1/np for Average), as runtime/execute.c does.
std::vector<uint8_t> reference(hvds_dtype_t t, size_t n, int np, hvds_reduce_op_t op, double pre,
                               double post) {
  std::vector<uint8_t> acc = rank_input(t, n, 0);
  hvds__scale(acc.data(), n, t, pre);
  for (int r = 1; r < np; r++) {
    std::vector<uint8_t> x = rank_input(t, n, r);
    hvds__scale(x.data(), n, t, pre);
    hvds__reduce(acc.data(), x.data(), n, t, op);
  }
  hvds__scale(acc.data(), n, t, op == HVDS_AVERAGE ? post / np : post);
  return acc;
}

TEST(GpuNccl, AllreduceEveryDtypeAndOp) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      const hvds_dtype_t types[] = {HVDS_UINT8,   HVDS_INT8,    HVDS_INT32,
                                    HVDS_INT64,   HVDS_FLOAT16, HVDS_FLOAT32,
                                    HVDS_FLOAT64, HVDS_BOOL,    HVDS_BFLOAT16};
      const hvds_reduce_op_t ops[] = {HVDS_SUM, HVDS_AVERAGE, HVDS_MIN, HVDS_MAX, HVDS_PRODUCT};
      for (hvds_dtype_t t : types) {
        for (hvds_reduce_op_t op : ops) {
          for (size_t n : {size_t{0}, size_t{1}, size_t{100003}}) {
            double pre = op == HVDS_PRODUCT ? 1.0 : 2.0, post = 0.5;
            std::vector<uint8_t> in = rank_input(t, n, R.rank);
            DeviceBuf send(in), recv(in.size());
            Done d;
            hvds_nccl_call_t c = d.call();
            bool inplace = n % 2 == 1;
            ASSERT_EQ(hvds__nccl_allreduce(R.comm, send.get(), inplace ? send.get() : recv.get(), n,
                                           t, op, pre, post, &c),
                      HVDS_SUCCESS);
            d.wait(1);
            ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
            std::vector<uint8_t> got = (inplace ? send : recv).download();
            ASSERT_TRUE(same_elems(t, got, reference(t, n, np, op, pre, post)))
                << "np " << np << " dtype " << t << " op " << op << " n " << n;
          }
        }
      }
      // No NCCL type: refused before anything is enqueued, no callback.
      Done d;
      hvds_nccl_call_t c = d.call();
      DeviceBuf b(64);
      EXPECT_EQ(hvds__nccl_allreduce(R.comm, b.get(), b.get(), 4, HVDS_INT16, HVDS_SUM, 1, 1, &c),
                HVDS_NOT_SUPPORTED);
      hvds__nccl_ctx_sync(R.ctx);
      EXPECT_EQ(d.calls, 0);
    });
  }
}

TEST(GpuNccl, FusedAllreduceWithJoinedTensors) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      const hvds_dtype_t t = HVDS_FLOAT32;
      const int n = 90;
      std::vector<size_t> counts(n);
      for (int i = 0; i < n; i++) counts[i] = (size_t)(i * 37 % 1000) * (i % 4 == 0 ? 100 : 1);
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      // Every rank's fused input is rank_input over the whole buffer; tensor 3 is joined on
      // the last rank (zeros there).
      std::vector<uint8_t> full = rank_input(t, total, R.rank);
      std::vector<std::unique_ptr<DeviceBuf>> in(n), out(n);
      std::vector<hvds_cuda_buf_t> ib(n), ob(n);
      size_t off = 0;
      for (int i = 0; i < n; i++) {
        in[i].reset(new DeviceBuf(full.data() + off * 4, counts[i] * 4));
        out[i].reset(new DeviceBuf(counts[i] * 4));
        bool joined = i == 3 && R.rank == R.size - 1;
        ib[i] = {joined ? nullptr : in[i]->get(), counts[i]};
        ob[i] = {out[i]->get(), counts[i]};
        off += counts[i];
      }
      DeviceBuf fusion(total * 4);
      Done d;
      hvds_nccl_call_t c = d.call();
      ASSERT_EQ(hvds__nccl_allreduce_fused(R.comm, ib.data(), ob.data(), n, fusion.get(), t,
                                           HVDS_AVERAGE, 1.0, 1.0, &c),
                HVDS_SUCCESS);
      d.wait(1);
      ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
      // Reference: the sum over ranks with the joined tensor's rank contributing zeros.
      std::vector<float> want(total, 0.0f);
      for (int r = 0; r < R.size; r++) {
        std::vector<uint8_t> x = rank_input(t, total, r);
        size_t o = 0;
        for (int i = 0; i < n; i++) {
          bool joined = i == 3 && r == R.size - 1;
          for (size_t k = 0; k < counts[i]; k++)
            if (!joined) want[o + k] += ((float*)x.data())[o + k];
          o += counts[i];
        }
      }
      off = 0;
      for (int i = 0; i < n; i++) {
        std::vector<float> got = out[i]->download_as<float>(counts[i]);
        for (size_t k = 0; k < counts[i]; k++)
          ASSERT_EQ(got[k], (float)((double)want[off + k] * (1.0 / R.size))) << i << " " << k;
        off += counts[i];
      }
    });
  }
}

// Horovod's hierarchical allreduce over the local and cross communicators (here every rank one
// host of its own GPUs: local = all, cross = itself), fused, with a total not a multiple of the
// local size (the padding), prescale, postscale and Average over both sizes.
TEST(GpuNccl, HierarchicalAllreduceEqualsTheReference) {
  for (int np : nps()) {
    inproc_spawn(np, [&](hvds_p2p_t* p) {
      hvds_nccl_ctx_t* ctx = nullptr;
      ASSERT_EQ(hvds__nccl_ctx_create(p->rank, 60000, &ctx), HVDS_SUCCESS);
      std::vector<int> all(p->size);
      std::iota(all.begin(), all.end(), 0);
      int self = p->rank;
      hvds_p2p_t *lv = nullptr, *cv = nullptr;
      ASSERT_EQ(hvds__p2p_sub_create(p, all.data(), p->size, 1, &lv), HVDS_SUCCESS);
      ASSERT_EQ(hvds__p2p_sub_create(p, &self, 1, 2, &cv), HVDS_SUCCESS);
      hvds_nccl_comm_t *local = nullptr, *cross = nullptr;
      ASSERT_EQ(hvds__nccl_comm_create_p2p(ctx, lv, 300, &local), HVDS_SUCCESS);
      ASSERT_EQ(hvds__nccl_comm_create_p2p(ctx, cv, 301, &cross), HVDS_SUCCESS);
      const hvds_dtype_t t = HVDS_FLOAT32;
      const std::vector<size_t> counts = {1, 1000, 33, 4097};  // 5131: odd
      size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      std::vector<uint8_t> full = rank_input(t, total, p->rank);
      std::vector<std::unique_ptr<DeviceBuf>> bufs;
      std::vector<hvds_cuda_buf_t> io;
      size_t off = 0;
      for (size_t c : counts) {
        bufs.emplace_back(new DeviceBuf(full.data() + off * 4, c * 4));
        io.push_back({bufs.back()->get(), c});
        off += c;
      }
      size_t padded = (total + p->size - 1) / p->size * p->size;
      DeviceBuf fusion(padded * 4);
      Done d;
      hvds_nccl_call_t c = d.call();
      ASSERT_EQ(
          hvds__nccl_allreduce_hierarchical(local, cross, io.data(), io.data(), (int)io.size(),
                                            fusion.get(), t, HVDS_AVERAGE, 2.0, 0.5, &c),
          HVDS_SUCCESS);
      d.wait(1);
      ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
      std::vector<uint8_t> want = reference(t, total, p->size, HVDS_AVERAGE, 2.0, 0.5);
      off = 0;
      for (size_t i = 0; i < counts.size(); i++) {
        std::vector<float> got = bufs[i]->download_as<float>(counts[i]);
        for (size_t k = 0; k < counts[i]; k++)
          ASSERT_EQ(got[k], ((const float*)want.data())[off + k]) << i << " " << k;
        off += counts[i];
      }
      hvds__nccl_comm_destroy(cross);
      hvds__nccl_comm_destroy(local);
      hvds__p2p_destroy(cv);
      hvds__p2p_destroy(lv);
      hvds__nccl_ctx_destroy(ctx);
    });
  }
}

TEST(GpuNccl, ReduceScatterEqualAndUnequalBlocks) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      for (bool equal : {true, false}) {
        std::vector<size_t> counts(R.size);
        for (int r = 0; r < R.size; r++) counts[r] = equal ? 5003 : 1000 + 777 * (size_t)r;
        size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
        size_t mine_off = std::accumulate(counts.begin(), counts.begin() + R.rank, size_t{0});
        DeviceBuf buf(rank_input(HVDS_INT32, total, R.rank)), out(counts[R.rank] * 4);
        Done d;
        hvds_nccl_call_t c = d.call();
        ASSERT_EQ(hvds__nccl_reducescatter(R.comm, buf.get(), out.get(), counts.data(), HVDS_INT32,
                                           HVDS_SUM, 3.0, 1.0, &c),
                  HVDS_SUCCESS);
        d.wait(1);
        ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
        std::vector<uint8_t> want = reference(HVDS_INT32, total, R.size, HVDS_SUM, 3.0, 1.0);
        std::vector<uint8_t> mine(want.begin() + mine_off * 4,
                                  want.begin() + (mine_off + counts[R.rank]) * 4);
        ASSERT_EQ(out.download(), mine) << "equal " << equal;
      }
    });
  }
}

TEST(GpuNccl, AllgatherEqualAndVariableBlocks) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      for (bool equal : {true, false}) {
        std::vector<size_t> bytes(R.size);
        for (int r = 0; r < R.size; r++) bytes[r] = equal ? 4096 : 1000 + 333 * (size_t)r + r % 2;
        size_t total = std::accumulate(bytes.begin(), bytes.end(), size_t{0});
        std::vector<uint8_t> want;
        for (int r = 0; r < R.size; r++) {
          std::vector<uint8_t> b = rank_input(HVDS_UINT8, bytes[r], r);
          want.insert(want.end(), b.begin(), b.end());
        }
        DeviceBuf send(rank_input(HVDS_UINT8, bytes[R.rank], R.rank)), recv(total);
        Done d;
        hvds_nccl_call_t c = d.call();
        ASSERT_EQ(hvds__nccl_allgather(R.comm, send.get(), recv.get(), bytes.data(), &c),
                  HVDS_SUCCESS);
        d.wait(1);
        ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
        ASSERT_EQ(recv.download(), want) << "equal " << equal;
      }
    });
  }
}

TEST(GpuNccl, BroadcastFromEveryRoot) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      for (int root = 0; root < R.size; root++) {
        DeviceBuf buf(rank_input(HVDS_UINT8, 100001, R.rank));
        Done d;
        hvds_nccl_call_t c = d.call();
        ASSERT_EQ(hvds__nccl_broadcast(R.comm, buf.get(), 100001, root, &c), HVDS_SUCCESS);
        d.wait(1);
        ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
        ASSERT_EQ(buf.download(), rank_input(HVDS_UINT8, 100001, root));
      }
    });
  }
}

TEST(GpuNccl, AlltoallvAndSparseExchange) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      int P = R.size;
      auto split = [](int from, int to) { return (size_t)((from * 31 + to * 17) % 7) * 100; };
      std::vector<size_t> sb(P), so(P), rb(P), ro(P);
      size_t st = 0, rt = 0;
      for (int q = 0; q < P; q++) {
        sb[q] = split(R.rank, q), so[q] = st, st += sb[q];
        rb[q] = split(q, R.rank), ro[q] = rt, rt += rb[q];
      }
      // Byte k of the block from a to b is (a * 7 + b * 3 + k) % 251.
      std::vector<uint8_t> send(st), want(rt);
      for (int q = 0; q < P; q++) {
        for (size_t k = 0; k < sb[q]; k++)
          send[so[q] + k] = (uint8_t)((R.rank * 7 + q * 3 + k) % 251);
        for (size_t k = 0; k < rb[q]; k++)
          want[ro[q] + k] = (uint8_t)((q * 7 + R.rank * 3 + k) % 251);
      }
      DeviceBuf ds(send), dr(rt);
      Done d;
      hvds_nccl_call_t c = d.call();
      ASSERT_EQ(hvds__nccl_alltoallv(R.comm, ds.get(), sb.data(), so.data(), dr.get(), rb.data(),
                                     ro.data(), &c),
                HVDS_SUCCESS);
      // The sparse exchange: counts first (on the GPU), then streams sized from them.
      hvds_sparse_layout_t lay = {1000, 2, HVDS_FLOAT32, HVDS_INT32};
      std::vector<uint64_t> scount(P);
      for (int q = 0; q < P; q++) scount[q] = (uint64_t)((R.rank + 2 * q) % 5) * 3;
      DeviceBuf dsc(scount), drc(P * 8);
      ASSERT_EQ(hvds__nccl_alltoall_u64(R.comm, dsc.as<uint64_t>(), drc.as<uint64_t>(), &c),
                HVDS_SUCCESS);
      d.wait(2);
      ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
      ASSERT_EQ(dr.download(), want);
      std::vector<uint64_t> rcount = drc.download_as<uint64_t>(P);
      for (int q = 0; q < P; q++) ASSERT_EQ(rcount[q], (uint64_t)((q + 2 * R.rank) % 5) * 3);
      // Stream from a to b: entry e has index b * 100 + e, values a + e, -a - e.
      auto stream = [&](int a, int b, uint64_t n) {
        std::vector<uint8_t> s(hvds__sstream_bytes(&lay, n, 0), 0);
        for (uint64_t e = 0; e < n; e++) {
          hvds__sparse_idx_set(&lay, s.data(), e, (int64_t)(b * 100 + e));
          float* v = (float*)(s.data() + hvds__pad8(n * 4)) + 2 * e;
          v[0] = (float)(a + e), v[1] = -(float)(a + e);
        }
        return s;
      };
      std::vector<uint8_t> sbuf, rwant;
      for (int q = 0; q < P; q++) {
        std::vector<uint8_t> a = stream(R.rank, q, scount[q]), b = stream(q, R.rank, rcount[q]);
        sbuf.insert(sbuf.end(), a.begin(), a.end());
        rwant.insert(rwant.end(), b.begin(), b.end());
      }
      DeviceBuf dss(sbuf), dsr(rwant.size());
      ASSERT_EQ(hvds__nccl_sparse_exchange(R.comm, &lay, dss.get(), scount.data(), dsr.get(),
                                           rcount.data(), &c),
                HVDS_SUCCESS);
      d.wait(3);
      ASSERT_EQ(d.first, HVDS_SUCCESS) << d.msg;
      ASSERT_EQ(dsr.download(), rwant);
    });
  }
}

TEST(GpuNccl, WaitsForReadyEventsAndCompletesInOrder) {
  for (int np : nps()) {
    run_ranks(np, [&](Rank& R) {
      const size_t n = 1 << 24;
      DeviceBuf buf(n * 4);
      cudaStream_t side;
      cudaEvent_t ready;
      CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
      CUDA_OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
      // The producer fills the buffer on its own stream; the collective must wait for it.
      CUDA_OK(cudaMemsetAsync(buf.get(), 0, n * 4, side));
      std::vector<int32_t> ones(n, 1);
      CUDA_OK(cudaMemcpyAsync(buf.get(), ones.data(), n * 4, cudaMemcpyHostToDevice, side));
      CUDA_OK(cudaEventRecord(ready, side));
      std::mutex mu;
      std::vector<int> order;
      struct Arg {
        std::mutex* mu;
        std::vector<int>* order;
        int i;
      };
      std::vector<Arg> args(50);
      auto cb = [](void* a, hvds_result_t st, const char*) {
        Arg* x = static_cast<Arg*>(a);
        std::lock_guard<std::mutex> lock(*x->mu);
        x->order->push_back(st == HVDS_SUCCESS ? x->i : -1);
      };
      void* evs[1] = {ready};
      for (int i = 0; i < 50; i++) {
        args[i] = {&mu, &order, i};
        hvds_nccl_call_t c = {i == 0 ? evs : nullptr, i == 0 ? 1 : 0, cb, &args[i]};
        // The first sums the whole buffer, the others touch one element each.
        ASSERT_EQ(hvds__nccl_allreduce(R.comm, buf.get(), buf.get(), i == 0 ? n : 1, HVDS_INT32,
                                       HVDS_SUM, 1, 1, &c),
                  HVDS_SUCCESS);
      }
      hvds__nccl_ctx_sync(R.ctx);
      std::vector<int> want(50);
      std::iota(want.begin(), want.end(), 0);
      EXPECT_EQ(order, want);
      std::vector<int32_t> got = buf.download_as<int32_t>(n);
      uint32_t first = 1;  // element 0 was summed by all 50 calls (int32 wraps like uint32)
      for (int i = 0; i < 50; i++) first *= (uint32_t)R.size;
      EXPECT_EQ(got[0], (int32_t)first);
      EXPECT_EQ(got[n - 1], R.size);
      cudaEventDestroy(ready);
      cudaStreamDestroy(side);
    });
  }
}

TEST(GpuNccl, AbortFailsLaterCalls) {
  run_ranks(1, [&](Rank& R) {
    DeviceBuf b(1024);
    hvds__nccl_comm_abort(R.comm);
    Done d;
    hvds_nccl_call_t c = d.call();
    EXPECT_EQ(hvds__nccl_allreduce(R.comm, b.get(), b.get(), 16, HVDS_FLOAT32, HVDS_SUM, 1, 1, &c),
              HVDS_SHUT_DOWN);
    EXPECT_STRNE(hvds__nccl_comm_error(R.comm), "");
    hvds__nccl_ctx_sync(R.ctx);
    EXPECT_EQ(d.calls, 0);
  });
}

TEST(GpuNccl, GroupsAndProcessSets) {
  for (int np : nps()) {
    inproc_spawn(np, [&](hvds_p2p_t* p) {
      hvds_nccl_ctx_t* ctx = nullptr;
      ASSERT_EQ(hvds__nccl_ctx_create(p->rank, 60000, &ctx), HVDS_SUCCESS);
      std::vector<int> all(p->size);
      std::iota(all.begin(), all.end(), 0);
      int self = p->rank;
      hvds_p2p_t *local = nullptr, *cross = nullptr, *odd = nullptr;
      ASSERT_EQ(hvds__p2p_sub_create(p, all.data(), p->size, 1, &local), HVDS_SUCCESS);
      ASSERT_EQ(hvds__p2p_sub_create(p, &self, 1, 2, &cross), HVDS_SUCCESS);  // one host each
      hvds_nccl_groups_t* g = nullptr;
      ASSERT_EQ(hvds__nccl_groups_create(ctx, p, local, cross, 100, &g), HVDS_SUCCESS);
      EXPECT_EQ(hvds__nccl_comm_size(hvds__nccl_groups_get(g, HVDS_NCCL_GLOBAL)), p->size);
      EXPECT_EQ(hvds__nccl_comm_size(hvds__nccl_groups_get(g, HVDS_NCCL_LOCAL)), p->size);
      EXPECT_EQ(hvds__nccl_comm_size(hvds__nccl_groups_get(g, HVDS_NCCL_CROSS)), 1);
      // Process set 5: ranks 0 and the last (one rank at np 1).
      std::vector<int> members = {0};
      if (p->size > 1) members.push_back(p->size - 1);
      ASSERT_EQ(hvds__p2p_sub_create(p, members.data(), (int)members.size(), 3, &odd),
                HVDS_SUCCESS);
      if (odd != nullptr) {
        hvds_nccl_comm_t *a = nullptr, *b = nullptr;
        ASSERT_EQ(hvds__nccl_groups_pset(g, 5, odd, 200, &a), HVDS_SUCCESS);
        ASSERT_EQ(hvds__nccl_groups_pset(g, 5, odd, 200, &b), HVDS_SUCCESS);
        EXPECT_EQ(a, b);  // cached
        EXPECT_EQ(hvds__nccl_comm_size(a), (int)members.size());
        DeviceBuf buf(rank_input(HVDS_INT64, 1000, 1));
        hvds_nccl_call_t c = HVDS_NCCL_CALL_INIT;
        ASSERT_EQ(
            hvds__nccl_allreduce(a, buf.get(), buf.get(), 1000, HVDS_INT64, HVDS_SUM, 1, 1, &c),
            HVDS_SUCCESS);
        hvds__nccl_ctx_sync(ctx);
        std::vector<uint8_t> want = rank_input(HVDS_INT64, 1000, 1);
        hvds__scale(want.data(), 1000, HVDS_INT64, (double)members.size());
        EXPECT_EQ(buf.download(), want);
        hvds__nccl_groups_remove_pset(g, 5);
      }
      hvds_nccl_comm_t* zero = nullptr;
      ASSERT_EQ(hvds__nccl_groups_pset(g, 0, nullptr, 0, &zero), HVDS_SUCCESS);
      EXPECT_EQ(zero, hvds__nccl_groups_get(g, HVDS_NCCL_GLOBAL));
      hvds__nccl_groups_destroy(g);
      hvds__p2p_destroy(odd);
      hvds__p2p_destroy(cross);
      hvds__p2p_destroy(local);
      hvds__nccl_ctx_destroy(ctx);
    });
  }
}

// Says once which np ran, so a one-GPU run does not read as a multi-GPU one.
class NpBanner : public ::testing::Environment {
 public:
  void SetUp() override {
    int ndev = device_count();
    printf("gpu_nccl_test: %d GPU(s); np %s\n", ndev,
           ndev >= 2 ? "1 and GPUs (up to 4)" : "1 only (NCCL needs one GPU per rank)");
  }
};
const auto* const banner = ::testing::AddGlobalTestEnvironment(new NpBanner);

}  // namespace
