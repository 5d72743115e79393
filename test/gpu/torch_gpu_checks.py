"""The PyTorch checks of `make test-gpu` (test/gpu/run.sh), run under the launcher on one GPU:
every rank's tensors on cuda:0, so np 2 is two processes sharing the GPU through the host-staged
path (docs/gpu.md). Each check prints one line and appends its figures to OUT/torch_gpu.jsonl;
the exit status is the number of failed checks.

  python torch_gpu_checks.py --out DIR
      [--checks collectives,stream,memory,training,sync_bn,split_sparse]
      [--bench]
      [--bench-nccl]

With HVDSPARSE_GPU_OPERATIONS=nccl the allreduces take the NCCL route instead of staging;
--bench-nccl (np 1, that route) compares hvd.allreduce with torch.distributed's NCCL, a fused
allreduce of 64 tensors with one of their size, and a small ResNet's step with the bare loop.

--device cpu runs the same checks on CPU tensors: a dry run of this script's own logic where
there is no GPU (the stream and memory checks need CUDA and are left out there)."""
import argparse
import json
import os
import socket
import time

import torch
import torch.nn.functional as F

import hvdsparse.torch as hvd
from hvdsparse.common import basics

failures = []


def record(out, check, ok, **figures):
    line = dict(check=check, ok=bool(ok), rank=hvd.rank(), size=hvd.size(), **figures)
    if hvd.rank() == 0:
        print("%-12s %s %s" % (check, "passed" if ok else "FAILED",
                               json.dumps(figures, sort_keys=True)), flush=True)
        with open(os.path.join(out, "torch_gpu.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")
    if not ok:
        failures.append(check)


def check_collectives(dev, out):
    """Every dense collective on the device, integer-valued float64: exact results."""
    r, n = hvd.rank(), hvd.size()
    errs = []
    x = torch.arange(6, dtype=torch.float64, device=dev) + r
    want = (torch.arange(6, dtype=torch.float64) * n + n * (n - 1) / 2)
    for name, got in [("allreduce", hvd.allreduce(x, op=hvd.Sum, name="c.ar")),
                      ("allreduce_", hvd.allreduce_(x.clone(), op=hvd.Sum, name="c.ar_"))]:
        if got.device != x.device or not torch.equal(got.cpu(), want):
            errs.append(name)
    g = hvd.grouped_allreduce([x, x * 2], op=hvd.Sum, name="c.gar")
    if not (torch.equal(g[0].cpu(), want) and torch.equal(g[1].cpu(), want * 2)):
        errs.append("grouped_allreduce")
    ga = hvd.allgather(torch.full((r + 1, 2), float(r), dtype=torch.float64, device=dev),
                       name="c.ag")
    want_ga = torch.cat([torch.full((k + 1, 2), float(k), dtype=torch.float64)
                         for k in range(n)])
    if ga.device != x.device or not torch.equal(ga.cpu(), want_ga):
        errs.append("allgather")
    b = hvd.broadcast(torch.full((3,), float(r), device=dev), root_rank=n - 1, name="c.bc")
    if not torch.equal(b.cpu(), torch.full((3,), float(n - 1))):
        errs.append("broadcast")
    a = hvd.alltoall(torch.full((n,), float(r), device=dev), name="c.a2a")
    if not torch.equal(a.cpu(), torch.arange(n, dtype=torch.float32)):
        errs.append("alltoall")
    rs = hvd.reducescatter(torch.ones(2 * n, device=dev), op=hvd.Sum, name="c.rs")
    if rs.device != x.device or not torch.equal(rs.cpu(), torch.full((2,), float(n))):
        errs.append("reducescatter")
    sp = torch.sparse_coo_tensor([[r, 5]], [1.0, 2.0], (8,), device=dev)
    sh = hvd.sparse_allreduce_async(sp, op=hvd.Sum, name="c.sparse")
    st = hvd.synchronize(sh)
    want_s = torch.zeros(8)
    for k in range(n):
        want_s[k] += 1
    want_s[5] += 2 * n
    # on the NCCL route the entries are gathered on the GPU (allgather), else staged
    on_route = dev.type == "cuda" and basics.gpu_operations_routed()
    if (st.device != x.device or not torch.equal(st.to_dense().cpu(), want_s)
            or (on_route and sh.algorithm != "allgather")):
        errs.append("sparse_allreduce")
    record(out, "collectives", not errs, wrong=errs)


def check_stream(dev, out, rounds=100):
    """The producer's stream is busy with a long kernel before it writes the tensor: the
    runtime must read the tensor after that write, every time."""
    s = torch.cuda.Stream(device=dev)
    right = 0
    for i in range(rounds):
        x = torch.zeros(1 << 16, device=dev)
        torch.cuda.current_stream(dev).synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(2_000_000)  # a few milliseconds of GPU time
            x.fill_(float(i + hvd.rank()))
            y = hvd.allreduce(x, op=hvd.Sum, name="stream.%d" % i)
            got = y[:4].cpu()  # read on s, after the result
        want = float(i * hvd.size() + hvd.size() * (hvd.size() - 1) // 2)
        right += int(torch.all(got == want))
    record(out, "stream", right == rounds, right=right, of=rounds)


def check_memory(dev, out, ops=1000):
    """1000 operations leave GPU memory where it was."""
    x = torch.ones(1 << 18, device=dev)
    for i in range(20):  # warm: the caching allocator and the pinned pool reach their sizes
        hvd.allreduce_(x, name="mem.%d" % (i % 4))
        hvd.allgather(x[:1000], name="mem.g")
    torch.cuda.synchronize(dev)
    before = torch.cuda.memory_allocated(dev)
    for i in range(ops):
        hvd.allreduce_(x, op=hvd.Average, name="mem.%d" % (i % 4))
        if i % 10 == 0:
            hvd.allgather(x[:1000], name="mem.g")
    torch.cuda.synchronize(dev)
    after = torch.cuda.memory_allocated(dev)
    record(out, "memory", after == before, allocated_before=before, allocated_after=after,
           ops=ops)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * 8 * 8, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def train(dev, kind, steps=6):
    """Parameters after steps of SGD with momentum through DistributedOptimizer (kind: plain,
    dear or topk), float64, the same data per rank on every device."""
    torch.manual_seed(0)
    model = Net().double().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    extra = {"dear": dict(pipeline="dear", model=model),
             "topk": dict(compression=hvd.Compression.topk(0.1, min_numel=100)),
             "plain": {}}[kind]
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **extra)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    g = torch.Generator().manual_seed(11 + hvd.rank())
    for _ in range(steps):
        x = torch.randn(16, 3, 16, 16, generator=g, dtype=torch.float64).to(dev)
        y = torch.randint(0, 10, (16,), generator=g).to(dev)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    if kind == "dear":
        opt.synchronize()
    return [p.detach().cpu() for p in model.parameters()]


def check_training(dev, out):
    """The ordinary optimizer, DeAR and top-k on the device end where the CPU run ends (top-k:
    the cuda/ kernel selects; on the NCCL route its sparse allreduce runs on the GPU too)."""
    for kind in ("plain", "dear", "topk"):
        on_dev, on_cpu = train(dev, kind), train("cpu", kind)
        diff = max(float((a - b).abs().max()) for a, b in zip(on_dev, on_cpu))
        record(out, "training." + kind, diff <= 1e-9, max_abs_difference=diff,
               route="nccl" if basics.gpu_operations_routed() else "host")


def split_pairs(r, n, k):
    """Rank r's top-k-like pairs: distinct sorted indices, integer values."""
    g = torch.Generator().manual_seed(40 + r)
    idx = torch.randperm(n, generator=g)[:k].sort().values
    return idx, torch.randint(-99, 100, (k,), generator=g).double()


def check_split_sparse(dev, out, n=1 << 20, k=4096):
    """Each split sparse algorithm and recursive doubling through the optimizer's entry for
    top-k pairs, the split ones exact and with 4-bit values: on the NCCL route they run on the
    GPU (gpu_sparse/split.py and recursive_doubling.py, counted as they are entered; the
    quantizer's kernels), staged otherwise; the result equals the sum of every rank's pairs
    computed on the CPU (quantized: within one step of 7 levels)."""
    from hvdsparse.torch import topk
    from hvdsparse.torch.gpu_sparse import recursive_doubling, split
    want = torch.zeros(n, dtype=torch.float64)
    for r in range(hvd.size()):
        i, v = split_pairs(r, n, k)
        want.index_add_(0, i, v)
    step = float(want.abs().max()) / 7
    on_route = dev.type == "cuda" and basics.gpu_operations_routed()
    errs, ran, entered = [], {}, []

    def counted(module, fn_name):
        fn = getattr(module, fn_name)

        def entry(*args, **kwargs):
            entered.append(fn_name)
            return fn(*args, **kwargs)
        setattr(module, fn_name, entry)
        return fn
    originals = [(split, "split_into_async", counted(split, "split_into_async")),
                 (recursive_doubling, "rd_into_async",
                  counted(recursive_doubling, "rd_into_async"))]
    runs = [(a, b) for a in ("ssar_split_allgather", "dsar_split_allgather", "zen")
            for b in (0, 4)] + [("auto", 4), ("ssar_recursive_doubling", 0)]
    try:
        for algorithm, bits in runs:
            idx, vals = split_pairs(hvd.rank(), n, k)
            res = torch.full((n,), 7.0, dtype=torch.float64, device=dev)  # stale values
            what = "%s.%d" % (algorithm, bits)
            del entered[:]
            h = topk.allreduce_into_async(vals.to(dev), idx.to(dev), res, "split." + what,
                                          hvd.Sum, 1.0, 1.0, hvd.global_process_set, algorithm,
                                          bits)
            ran[what] = "gpu" if entered else "staged"
            got = hvd.synchronize(h)
            err = float((got.cpu() - want).abs().max())
            if got.device != res.device or err > (step * (1 + 1e-6) if bits else 0):
                errs.append(what)
            if on_route != (ran[what] == "gpu"):
                errs.append(what + " ran " + ran[what])
    finally:
        for module, fn_name, fn in originals:
            setattr(module, fn_name, fn)
    record(out, "split_sparse", not errs, wrong=errs, ran=ran)


def sync_bn_step(dev):
    """Output, input gradient and running statistics of SyncBatchNorm on one rank's batch."""
    torch.manual_seed(3)
    bn = hvd.SyncBatchNorm(4).double().to(dev)
    g = torch.Generator().manual_seed(5 + hvd.rank())
    x = torch.randn(6, 4, 5, 5, generator=g, dtype=torch.float64).to(dev).requires_grad_()
    y = bn(x)
    (y * y).sum().backward()
    return [t.detach().cpu() for t in (y, x.grad, bn.running_mean, bn.running_var)]


def check_sync_bn(dev, out):
    """SyncBatchNorm on the device (Horovod's GPU-only case) equals the same step on the CPU."""
    on_dev, on_cpu = sync_bn_step(dev), sync_bn_step("cpu")
    diff = max(float((a - b).abs().max()) for a, b in zip(on_dev, on_cpu))
    record(out, "sync_batch_norm", diff <= 1e-9, max_abs_difference=diff)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def bench(dev, out, sizes_mib=(1, 4, 16, 64), reps=20):
    """Allreduce of float32 CUDA tensors through hvd (host-staged) against torch.distributed's
    gloo on the same tensors, same job, alternating; bus bandwidth from the median."""
    import torch.distributed as dist
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else 0, root_rank=0,
                                name="bench.port")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())
    n = hvd.size()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda d: None)
    for mib in sizes_mib:
        x = torch.ones(mib << 18, device=dev)
        factor = 2 * (n - 1) / n if n > 1 else 1.0
        for _ in range(3):
            hvd.allreduce_(x, name="bench.%d" % mib)
            dist.all_reduce(x)
        sync(dev)

        def ours():
            hvd.allreduce_(x, name="bench.%d" % mib)
            sync(dev)

        def gloo():
            dist.all_reduce(x)
            sync(dev)
        a = timed(ours, reps)
        b = timed(gloo, reps)
        bw = lambda t: factor * x.numel() * 4 / t / 1e9  # noqa: E731
        record(out, "bench.%dMiB" % mib, True, hvdsparse_busbw_GBps=round(bw(a[0]), 3),
               gloo_busbw_GBps=round(bw(b[0]), 3), ratio=round(b[0] / a[0], 3),
               hvdsparse_ms=[round(t * 1e3, 3) for t in a],
               gloo_ms=[round(t * 1e3, 3) for t in b])
    dist.destroy_process_group()


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.na, self.nb = torch.nn.BatchNorm2d(c), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.nb(self.b(F.relu(self.na(self.a(x))))))


def small_resnet():
    """A ResNet of 6 residual blocks for 32x32 images (1.4 M parameters)."""
    layers = [torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU()]
    for c_in, c in ((64, 64), (64, 128), (128, 128)):
        if c_in != c:
            layers += [torch.nn.Conv2d(c_in, c, 3, stride=2, padding=1), torch.nn.ReLU()]
        layers += [Block(c), Block(c)]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10)]
    return torch.nn.Sequential(*layers)


def bench_nccl(dev, out, reps=30):
    """np 1 on the NCCL route (HVDSPARSE_GPU_OPERATIONS=nccl): hvd.allreduce against
    torch.distributed's NCCL on the same CUDA buffers, 64 tensors of 256 KiB against one of
    16 MiB, and a small ResNet's step with DistributedOptimizer against the bare loop."""
    import torch.distributed as dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % free_port(), rank=0,
                            world_size=1)
    sync = torch.cuda.synchronize
    for size in (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20):
        x = torch.ones(size // 4, device=dev)
        for _ in range(5):
            hvd.allreduce(x, name="nb.%d" % size)
            dist.all_reduce(x)
        sync(dev)

        def ours():
            hvd.allreduce(x, name="nb.%d" % size, op=hvd.Sum)
            sync(dev)

        def ours_in_place():
            hvd.allreduce_(x, name="nb.%d" % size, op=hvd.Sum)
            sync(dev)

        def theirs():
            dist.all_reduce(x)
            sync(dev)
        a, b, c = timed(ours, reps), timed(ours_in_place, reps), timed(theirs, reps)
        record(out, "nccl.%dB" % size, True, hvdsparse_us=round(a[0] * 1e6, 1),
               hvdsparse_in_place_us=round(b[0] * 1e6, 1), torch_nccl_us=round(c[0] * 1e6, 1),
               algbw_ratio=round(c[0] / a[0], 3), extra_us=round((a[0] - c[0]) * 1e6, 1),
               spreads_us=[[round(t * 1e6, 1) for t in v] for v in (a, b, c)])
    parts = [torch.ones(64 << 10, device=dev) for _ in range(64)]
    whole = torch.ones(4 << 20, device=dev)

    def fused():
        hvd.grouped_allreduce_(parts, name="nb.parts", op=hvd.Sum)
        sync(dev)

    def single():
        hvd.allreduce_(whole, name="nb.whole", op=hvd.Sum)
        sync(dev)
    for _ in range(3):
        fused(), single()
    f, s = timed(fused, reps), timed(single, reps)
    record(out, "nccl.fused64x256KiB", f[0] <= 1.3 * s[0], fused_us=round(f[0] * 1e6, 1),
           single_16MiB_us=round(s[0] * 1e6, 1), ratio=round(f[0] / s[0], 3))
    torch.manual_seed(0)
    model = small_resnet().to(dev)
    data = torch.randn(64, 3, 32, 32, device=dev)
    labels = torch.randint(0, 10, (64,), device=dev)
    bare = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    wrapped = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                       named_parameters=model.named_parameters())

    def step(opt):
        opt.zero_grad()
        F.cross_entropy(model(data), labels).backward()
        opt.step()
        sync(dev)
    for _ in range(5):
        step(bare), step(wrapped)
    times = {"bare": [], "hvd": []}
    for _ in range(5):  # alternating blocks of 10 steps
        for name, opt in (("bare", bare), ("hvd", wrapped)):
            t = timed(lambda: step(opt), 10)
            times[name].append(t[0])
    bare_ms, hvd_ms = sorted(times["bare"])[2] * 1e3, sorted(times["hvd"])[2] * 1e3
    record(out, "nccl.resnet_step", hvd_ms <= 1.05 * bare_ms, bare_ms=round(bare_ms, 3),
           hvdsparse_ms=round(hvd_ms, 3), ratio=round(hvd_ms / bare_ms, 3))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--checks",
                    default="collectives,stream,memory,training,sync_bn,split_sparse")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--bench-nccl", action="store_true")
    args = ap.parse_args()
    hvd.init()
    dev = torch.device("cuda:0") if args.device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if hvd.rank() == 0:
        os.makedirs(args.out, exist_ok=True)
        print("torch %s, CUDA %s, hvdsparse NCCL %d, %d ranks on %s" % (
            torch.__version__, torch.version.cuda, hvd.nccl_built(), hvd.size(), dev),
            flush=True)
    checks = {"collectives": check_collectives, "stream": check_stream,
              "memory": check_memory, "training": check_training, "sync_bn": check_sync_bn,
              "split_sparse": check_split_sparse}
    for name in args.checks.split(","):
        if dev.type == "cpu" and name in ("stream", "memory"):
            continue
        checks[name](dev, args.out)
    if args.bench:
        bench(dev, args.out)
    if args.bench_nccl:
        bench_nccl(dev, args.out)
    hvd.shutdown()
    raise SystemExit(len(failures))


if __name__ == "__main__":
    main()
