"""hvdsparse DistributedOptimizer vs torch DistributedDataParallel (gloo), same model and data.

One run launches both at --np ranks (hvdsparse through its launcher, DDP as --np processes with
MASTER_ADDR=127.0.0.1), alternating, --reps times, and prints samples/s of each and the ratio:

    python3 bench/torch_ddp_compare.py --launcher build/bin/hvdsparse --model mlp --reps 3
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launcher", default=os.path.join(ROOT, "build", "bin", "hvdsparse"))
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--groups", type=int, default=0,
                   help="DistributedOptimizer groups (0: one allreduce per parameter)")
    p.add_argument("--worker", choices=["hvd", "ddp"], help=argparse.SUPPRESS)
    return p.parse_args()


def build(model_name):
    import torch.nn as nn
    if model_name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 100))
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 8 * 8, 512), nn.ReLU(),
                         nn.Linear(512, 100))


def worker(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build(args.model)
    if args.worker == "hvd":
        import hvdsparse.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                       named_parameters=model.named_parameters(),
                                       groups=args.groups or None)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        barrier = hvd.barrier
        net = model
    else:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        barrier = dist.barrier
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch_size, 3, 32, 32, generator=g)
    y = torch.randint(0, 100, (args.batch_size,), generator=g)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    for _ in range(args.warmup):
        step()
    barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print("RESULT %.1f" % (args.steps * args.batch_size * size / elapsed), flush=True)
    if args.worker == "ddp":
        import torch.distributed as dist
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def common_args(args):
    return ["--model", args.model, "--batch-size", str(args.batch_size), "--steps",
            str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
            "--groups", str(args.groups)]


def result(text, what):
    m = re.search(r"RESULT ([0-9.]+)", text)
    if not m:
        sys.exit("%s run failed:\n%s" % (what, text[-3000:]))
    return float(m.group(1))


def run_hvd(args):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.pathsep.join(
        [os.path.join(ROOT, "frameworks", "common"), os.path.join(ROOT, "frameworks", "pytorch")]))
    cmd = [args.launcher, "run", "-np", str(args.np), sys.executable, __file__, "--worker",
           "hvd"] + common_args(args)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    return result(out.stdout + out.stderr, "hvdsparse")


def run_ddp(args):
    port = free_port()
    procs = []
    for r in range(args.np):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(args.np), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", "ddp"] +
                                      common_args(args), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    return result(outs[0], "DDP")


def main():
    args = parse()
    if args.worker:
        return worker(args)
    hvd_runs, ddp_runs = [], []
    for rep in range(args.reps):
        order = (run_hvd, run_ddp) if rep % 2 == 0 else (run_ddp, run_hvd)
        for fn in order:
            value = fn(args)
            (hvd_runs if fn is run_hvd else ddp_runs).append(value)
            print("rep %d %-9s %10.1f samples/s" % (rep, "hvdsparse" if fn is run_hvd else "DDP",
                                                     value), flush=True)
    h, d = statistics.median(hvd_runs), statistics.median(ddp_runs)
    knobs = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                     if k.startswith(("HVDSPARSE_", "HOROVOD_")))
    print("model %s, np %d, batch %d per rank, %d steps, %d reps (median), groups %d%s:"
          % (args.model, args.np, args.batch_size, args.steps, args.reps, args.groups,
             ", " + knobs if knobs else ""))
    print("hvdsparse DistributedOptimizer: %.1f samples/s" % h)
    print("torch DDP (gloo):               %.1f samples/s" % d)
    print("ratio hvdsparse/DDP: %.2fx" % (h / d))


if __name__ == "__main__":
    main()
