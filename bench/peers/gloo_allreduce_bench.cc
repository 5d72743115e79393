// gloo_allreduce_bench: Gloo's own float32 sum allreduce over the same size sweep, timing and
// output as hvdsparse-perf, for comparison. Start N copies of it, one per rank:
//   gloo_allreduce_bench --rank R --size N --store DIR [--algorithm A] [-b 1M -e 256M -f 4 ...]
// The ranks rendezvous through a gloo::rendezvous::FileStore in DIR (an empty directory shared by
// the N processes) and talk over Gloo's TCP transport, on loopback by default (--host). On hosts
// that are network namespaces (test/cluster/cluster.sh) start each rank with `ip netns exec HOST`
// and pass --iface NAME: every rank binds its own host's address on that interface, and the
// FileStore works across them because the namespaces share the filesystem.
//
// --algorithm default|ring|bcube runs the newer gloo::allreduce (unspecified, ring or bcube);
// classic-ring|classic-ring-chunked|halving-doubling|classic-bcube run Gloo's older algorithm
// classes, built once per size and run() repeatedly. ("halving_doubling" is accepted too.)
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

struct Args {
  hvds_bench_sweep_t sweep;
  int rank = -1, size = -1;
  std::string store, host = "127.0.0.1", iface, algorithm = "default";
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: gloo_allreduce_bench --rank R --size N --store DIR [options]\n"
               "  --algorithm A  default | ring | bcube (gloo::allreduce), classic-ring |\n"
               "                 classic-ring-chunked | halving-doubling | classic-bcube\n"
               "  --host H       address of the TCP device (default 127.0.0.1)\n"
               "  --iface NAME   bind the address of this interface instead of --host\n");
  hvds_bench_sweep_usage(f);
}

// Returns 0, 1 after help, -1 on a bad command line.
int parse(int argc, char** argv, Args* a) {
  hvds_bench_sweep_defaults(&a->sweep, "gloo");
  for (int i = 1; i < argc; i++) {
    int rc = hvds_bench_parse_sweep_opt(argc, argv, &i, &a->sweep);
    if (rc < 0) return -1;
    if (rc > 0) continue;
    std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") {
      usage(stdout);
      return 1;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "unknown option or missing value: %s\n", opt.c_str());
      return -1;
    }
    const char* val = argv[++i];
    if (opt == "--rank")
      a->rank = std::atoi(val);
    else if (opt == "--size")
      a->size = std::atoi(val);
    else if (opt == "--store")
      a->store = val;
    else if (opt == "--host")
      a->host = val;
    else if (opt == "--iface")
      a->iface = val;
    else if (opt == "--algorithm")
      a->algorithm = val;
    else {
      std::fprintf(stderr, "unknown option %s\n", opt.c_str());
      return -1;
    }
  }
  if (a->algorithm == "halving_doubling") a->algorithm = "halving-doubling";
  if (a->rank < 0 || a->size < 1 || a->rank >= a->size || a->store.empty()) {
    std::fprintf(stderr, "--rank, --size and --store are required\n");
    return -1;
  }
  return 0;
}

using Op = std::function<void()>;

// The operation that allreduces p[0..count) in place with the chosen algorithm.
Op make_op(const std::shared_ptr<gloo::Context>& ctx, const std::string& algo, float* p,
           size_t count) {
  std::vector<float*> ptrs{p};
  const int n = static_cast<int>(count);
  std::shared_ptr<gloo::Algorithm> classic;
  if (algo == "classic-ring") classic = std::make_shared<gloo::AllreduceRing<float>>(ctx, ptrs, n);
  if (algo == "classic-ring-chunked")
    classic = std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, ptrs, n);
  if (algo == "halving-doubling")
    classic = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, n);
  if (algo == "classic-bcube")
    classic = std::make_shared<gloo::AllreduceBcube<float>>(ctx, ptrs, n);
  if (classic) return [classic] { classic->run(); };
  gloo::AllreduceOptions::Algorithm kind = gloo::AllreduceOptions::Algorithm::UNSPECIFIED;
  if (algo == "ring")
    kind = gloo::AllreduceOptions::Algorithm::RING;
  else if (algo == "bcube")
    kind = gloo::AllreduceOptions::Algorithm::BCUBE;
  else if (algo != "default")
    throw std::runtime_error("unknown algorithm " + algo);
  return [ctx, kind, p, count] {
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(p, count);
    opts.setAlgorithm(kind);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(1);
    gloo::allreduce(opts);
  };
}

// In-place allreduce of a few doubles or longs, used to combine the ranks' statistics.
template <typename T>
void combine(const std::shared_ptr<gloo::Context>& ctx, T* p, size_t n, bool max) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(p, n);
  using Fn = void (*)(void*, const void*, const void*, size_t);
  opts.setReduceFunction(max ? static_cast<Fn>(&gloo::max<T>) : static_cast<Fn>(&gloo::sum<T>));
  opts.setTag(2);
  gloo::allreduce(opts);
}

// Runs one size and fills *row.
void run_size(const std::shared_ptr<gloo::Context>& ctx, const Args& a, size_t count,
              hvds_bench_row_t* row) {
  std::vector<float> buf(count);
  hvds_bench_fill_f32(buf.data(), count, a.rank);
  Op op = make_op(ctx, a.algorithm, buf.data(), count);
  std::vector<double> stats(a.sweep.iters + 1);
  for (int i = 0; i < a.sweep.warmup; i++) op();
  for (int i = 0; i < a.sweep.iters; i++) {
    double t0 = hvds_bench_now_us();
    op();
    stats[i] = hvds_bench_now_us() - t0;
  }
  long wrong = -1;
  double max_err = 0;
  if (a.sweep.check) {  // the timed iterations reduced their own results again: start afresh
    hvds_bench_fill_f32(buf.data(), count, a.rank);
    op();
    wrong = hvds_bench_check_sum_f32(buf.data(), count, a.size, &max_err);
  }
  stats[a.sweep.iters] = max_err;
  combine(ctx, stats.data(), stats.size(), true);
  if (wrong >= 0) combine(ctx, &wrong, 1, false);
  row->wrong = wrong;
  row->max_err = stats[a.sweep.iters];
  hvds_bench_row_times(row, stats.data(), a.sweep.iters);
  hvds_bench_row_bandwidth(row);
}

int run(const Args& a) {
  gloo::transport::tcp::attr attr;
  attr.hostname = a.host;
  attr.iface = a.iface;  // when set, Gloo binds this interface's address and ignores hostname
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(a.store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(a.rank, a.size);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);

  std::string label = a.sweep.label;
  if (label == "gloo") label = "gloo-" + a.algorithm;
  if (a.rank == 0) {
    std::string info =
        "dtype float32, op sum, in place, algorithm " + a.algorithm + ", TCP " +
        (a.iface.empty() ? a.host : "interface " + a.iface);
    hvds_bench_print_header(stdout, "gloo_allreduce_bench allreduce", info.c_str(), &a.sweep,
                            a.size);
  }
  long wrong_total = 0;
  double bw_sum = 0;
  int rows = 0;
  for (size_t bytes = a.sweep.min_bytes ? a.sweep.min_bytes : 4; bytes <= a.sweep.max_bytes;
       bytes *= a.sweep.factor) {
    size_t count = bytes / sizeof(float);
    if (count > 0) {
      hvds_bench_row_t row{};
      row.impl = label.c_str();
      row.coll = "allreduce";
      row.np = a.size;
      row.bytes = count * sizeof(float);
      row.count = count;
      row.dtype = "float32";
      row.redop = "sum";
      run_size(ctx, a, count, &row);
      if (a.rank == 0) hvds_bench_print_row(stdout, &row, a.sweep.csv);
      wrong_total += row.wrong > 0 ? row.wrong : 0;
      bw_sum += row.busbw;
      rows++;
    }
    if (bytes > a.sweep.max_bytes / a.sweep.factor) break;
  }
  if (a.rank == 0)
    hvds_bench_print_footer(stdout, wrong_total, rows ? bw_sum / rows : 0, a.sweep.check);
  return wrong_total > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  int rc = parse(argc, argv, &a);
  if (rc != 0) {
    if (rc < 0) usage(stderr);
    return rc > 0 ? 0 : 2;
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", a.rank, e.what());
    return 1;
  }
}
