#!/usr/bin/env python3
"""torch_allreduce_bench: float32 sum allreduce of torch.distributed (gloo backend) or of Horovod
(horovod.torch), over the same size sweep, timing and CSV rows as hvdsparse-perf. Start one copy
per rank:

  RANK=r WORLD_SIZE=n MASTER_ADDR=a MASTER_PORT=p [GLOO_SOCKET_IFNAME=if] \
      python3 torch_allreduce_bench.py [--backend torch] -b 1M -e 256M -f 4 --csv
  python3 torch_allreduce_bench.py --backend horovod ...   (Horovod's own environment: horovodrun,
      or HOROVOD_RANK/SIZE/... and a rendezvous server as bench/suite/peers.py sets them)

Each iteration is timed on every rank around one in-place allreduce (blocking); the iteration's
time is the slowest rank's, `time` the median and `min` the fastest over -n iterations, after -w
untimed ones. The check fills every rank with hvdsparse-perf's pattern (small integers, exact
sums) and counts wrong elements over all ranks."""
import argparse
import os
import re
import sys
import time

import torch

# Rank r's element i: ((7 i + 5 r) mod 11) + 1, as hvds_bench_value() in bench/perf/bench_util.h.


def pattern(count, rank):
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + rank * 5) % 11 + 1).to(torch.float32)


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


class TorchGloo:
    def __init__(self):
        import torch.distributed as dist
        dist.init_process_group("gloo")
        self.dist, self.rank, self.size = dist, dist.get_rank(), dist.get_world_size()

    def allreduce(self, t, name):
        self.dist.all_reduce(t)

    def reduce_max(self, t, name):
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)

    def close(self):
        # Not destroy_process_group(): in torch 2.5 it can deadlock (the main thread joins Gloo's
        # worker thread holding the GIL while that thread needs it to free a tensor); the process
        # exits right after, which frees everything.
        pass


class Horovod:
    def __init__(self):
        import horovod.torch as hvd
        hvd.init()
        self.hvd, self.rank, self.size = hvd, hvd.rank(), hvd.size()

    def allreduce(self, t, name):  # one tensor name per size, as hvdsparse-perf does
        self.hvd.allreduce_(t, op=self.hvd.Sum, name=name)

    def reduce_max(self, t, name):
        t.copy_(self.hvd.allgather(t.unsqueeze(0), name=name).max(0).values)

    def close(self):
        self.hvd.shutdown()


def run_size(be, count, a):
    """Returns (median us, min us, max us, first us, wrong elements over all ranks or -1, max
    error)."""
    buf = pattern(count, be.rank)
    name = f"allreduce.{count}"
    for _ in range(a.warmup):
        be.allreduce(buf, name)
    stats = torch.zeros(a.iters + 1, dtype=torch.float64)  # the iterations, then the max error
    for i in range(a.iters):
        t0 = time.perf_counter()
        be.allreduce(buf, name)
        stats[i] = (time.perf_counter() - t0) * 1e6
    wrong = torch.zeros(1, dtype=torch.float64)
    if a.check:  # the timed iterations reduced their own results again: start afresh
        buf = pattern(count, be.rank)
        be.allreduce(buf, name)
        want = sum(pattern(11, r) for r in range(be.size)).repeat(count // 11 + 1)[:count]
        err = (buf - want).abs()
        stats[a.iters] = float(err.max()) if count else 0.0
        wrong[0] = float((err > 0).sum())
    be.reduce_max(stats, f"stats.{count}")
    if a.check:
        be.allreduce(wrong, f"wrong.{count}")
    first = float(stats[0]) if a.iters else 0.0
    it = sorted(stats[:a.iters].tolist())
    n = len(it)
    med = it[n // 2] if n % 2 else 0.5 * (it[n // 2 - 1] + it[n // 2])
    return (med, it[0], it[-1], first, int(wrong.item()) if a.check else -1,
            float(stats[a.iters]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["torch", "horovod"], default="torch")
    p.add_argument("-b", type=parse_size, default=1 << 20)
    p.add_argument("-e", type=parse_size, default=256 << 20)
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", dest="iters", type=int, default=20)
    p.add_argument("-w", dest="warmup", type=int, default=5)
    p.add_argument("-c", dest="check", type=int, default=1)
    p.add_argument("--csv", action="store_true")
    p.add_argument("--label", default=None)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    be = TorchGloo() if a.backend == "torch" else Horovod()
    label = a.label or ("torch-gloo" if a.backend == "torch" else "horovod-gloo")
    if be.rank == 0:
        print(f"# torch_allreduce_bench allreduce ({a.backend}, torch {torch.__version__}): "
              f"np {be.size}, sizes {a.b}..{a.e} x{a.f}, iters {a.iters}, warmup {a.warmup}, "
              f"check {a.check}")
        print("# time = median (min, max, first) over iterations of the slowest rank's "
              "start-to-completion time")
        print("impl,coll,np,bytes,count,dtype,redop,time_us,min_us,algbw_gbs,busbw_gbs,wrong,"
              "max_err,max_us,first_us", flush=True)
    wrong_total, nbytes = 0, a.b
    while nbytes <= a.e:
        count = nbytes // 4
        med, mn, mx, first, wrong, max_err = run_size(be, count, a)
        algbw = count * 4 / (med * 1e3) if med > 0 else 0.0
        busbw = algbw * (2.0 * (be.size - 1) / be.size if be.size > 1 else 1.0)
        if be.rank == 0:
            print(f"{label},allreduce,{be.size},{count * 4},{count},float32,sum,{med:.2f},"
                  f"{mn:.2f},{algbw:.4f},{busbw:.4f},{wrong},{max_err:g},{mx:.2f},{first:.2f}",
                  flush=True)
        wrong_total += max(wrong, 0)
        nbytes *= a.f
    if be.rank == 0:
        print(f"# Out of bounds values : {wrong_total} {'FAILED' if wrong_total else 'OK'}")
    be.close()
    return 1 if wrong_total else 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # no interpreter teardown: torch's process group destructor can hang there too
