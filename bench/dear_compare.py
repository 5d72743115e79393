"""DeAR vs the ordinary hvdsparse DistributedOptimizer vs torch DDP (gloo): samples/s.

Every rank runs every configuration in the same processes, one after the other, --reps times
(the median is reported), on the same model, seed and synthetic data. Run it under the
launcher, on one host or several:

    build/bin/hvdsparse run -np 4 -H a:2,b:2 python3 bench/dear_compare.py --model all

or let it start itself locally: python3 bench/dear_compare.py --np 2 --model conv --steps 10

or on H namespace hosts with shaped links, one rank each (test/cluster/cluster.sh; needs root):

    python3 bench/dear_compare.py --cluster 4x300mbit --model all

Rank 0 prints one CSV line per configuration (header first):

    model,config,np,batch,bucket_mb,steps,samples_per_s,vs_hvd,vs_ddp

config is dear (pipeline="dear", buckets of bucket_mb), dear_tuned (the same with
tune_bucket_size=True; bucket_mb is the size it chose), hvd (the ordinary DistributedOptimizer:
one allreduce per gradient, fused by the runtime) or ddp (DistributedDataParallel over gloo,
bucket_cap_mb=bucket_mb). vs_hvd and vs_ddp divide samples_per_s by hvd's and by ddp's at the
same bucket size (the first ddp row when there is none). samples/s counts every rank's samples;
the timed region ends after DeAR's final flush(). DDP's gloo group needs rank 0's address: on one
host it is 127.0.0.1, across hosts --master-addr (or MASTER_ADDR), else rank 0's host name;
set GLOO_SOCKET_IFNAME to pick the interface.
"""
import argparse
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VOCAB, SEQ = 2000, 64


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="all", choices=["conv", "transformer", "all"])
    p.add_argument("--steps", type=int, default=20, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per run")
    p.add_argument("--batch", type=int, default=16, help="samples per rank per step")
    p.add_argument("--phases", help="rank 0 appends each step's forward, backward and "
                   "step() times (microseconds since the epoch) to this JSON-lines file, for "
                   "bench/dear_overlap.py to set beside the runtime's timeline")
    p.add_argument("--vocab", type=int, default=VOCAB,
                   help="the transformer's vocabulary (its embedding and output layer)")
    p.add_argument("--bucket-mb", default="1,4",
                   help="comma-separated bucket sizes (MB) for dear and ddp")
    p.add_argument("--configs", default="dear,hvd,ddp",
                   help="comma-separated subset of dear,dear_tuned,hvd,ddp")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR"))
    p.add_argument("--np", type=int, help="start this many local ranks through the launcher")
    p.add_argument("--launcher", default=os.path.join(ROOT, "build", "bin", "hvdsparse"))
    p.add_argument("--cluster", help="HxRATE (e.g. 4x300mbit): bring up H namespace hosts "
                   "with links of RATE, run one rank on each, take them down")
    p.add_argument("--timeout", type=float, default=3600, help="seconds for a --cluster run")
    return p.parse_args()


def own_argv():
    """This script's arguments less the ones that say how to start it."""
    argv, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("--np", "--launcher", "--cluster", "--timeout"):
            skip = True
            continue
        if a.startswith(("--np=", "--launcher=", "--cluster=", "--timeout=")):
            continue
        argv.append(a)
    return argv


def relaunch(args):
    """Not under the launcher and --np given: run this script again under it."""
    cmd = [args.launcher, "run", "-np", str(args.np), sys.executable, os.path.abspath(__file__)]
    os.execv(args.launcher, cmd + own_argv())


def run_on_cluster(args):
    """--cluster HxRATE: the hosts come up, the job runs one rank per host with DDP's gloo on
    the cluster interface, the hosts go down (also on failure or interrupt)."""
    import subprocess
    sys.path.insert(0, os.path.join(HERE, "suite"))
    from cluster import Cluster
    hosts, rate = args.cluster.split("x", 1)
    with Cluster(int(hosts), rate, "dcx-") as c:
        print("# %s hosts at %s: %s" % (hosts, rate, " ".join(c.addrs)), flush=True)
        env = dict(os.environ, GLOO_SOCKET_IFNAME=c.iface)
        forward = ["-x", "GLOO_SOCKET_IFNAME"] + (["-x", "PYTHONPATH"]
                                                  if "PYTHONPATH" in env else [])
        cmd = ([args.launcher, "run", "-np", hosts] + c.launcher_flags() + forward +
               [sys.executable, os.path.abspath(__file__)] + own_argv() +
               ["--master-addr", c.addrs[0]])
        rc = subprocess.run(cmd, env=env, timeout=args.timeout).returncode
    sys.exit(rc)


# ---- models and data -------------------------------------------------------------------------
def conv_model():
    """A CPU-sized ResNet-ish classifier for 3x32x32 inputs (0.6 M parameters)."""
    import torch.nn as nn

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU())
    return nn.Sequential(block(3, 32, 1), block(32, 64, 2), block(64, 64, 1),
                         block(64, 128, 2), block(128, 128, 1), block(128, 256, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100))


def transformer_model():
    """A small transformer language model (4 layers, d=256; 4.2 M parameters at the default
    vocabulary of 2000, 3.3 M at 256), sequences of SEQ tokens."""
    import torch.nn as nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 256)
            layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = nn.Linear(256, VOCAB)

        def forward(self, x):
            return self.head(self.enc(self.emb(x)))
    return LM()


def make_model(name):
    return conv_model() if name == "conv" else transformer_model()


def make_batch(name, batch, rank):
    import torch
    g = torch.Generator().manual_seed(1000 + rank)
    if name == "conv":
        return torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 100, (batch,),
                                                                         generator=g)
    x = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
    return x, torch.randint(0, VOCAB, (batch, SEQ), generator=g)


def loss_fn(name, out, y):
    import torch.nn.functional as F
    if name == "conv":
        return F.cross_entropy(out, y)
    return F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1))


# ---- one timed run ---------------------------------------------------------------------------
def ddp_group(hvd, args):
    """Initialises torch.distributed (gloo) with the launcher's ranks, once."""
    import torch.distributed as dist
    if dist.is_initialized():
        return
    addr, port = None, None
    if hvd.rank() == 0:
        if hvd.local_size() == hvd.size():
            addr = "127.0.0.1"
        else:
            addr = args.master_addr or socket.gethostbyname(socket.gethostname())
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
    addr, port = hvd.broadcast_object((addr, port), root_rank=0, name="dear_compare.addr")
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port),
                            rank=hvd.rank(), world_size=hvd.size())


def build_run(hvd, args, model_name, config, bucket_mb):
    """(model to call, optimizer, flush callable, tuner or None) for one configuration."""
    import torch
    torch.manual_seed(0)
    model = make_model(model_name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if config == "ddp":
        ddp_group(hvd, args)
        net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_mb,
                                                        broadcast_buffers=False)
        return net, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9), None
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    if config == "hvd":
        return model, hvd.DistributedOptimizer(
            opt, named_parameters=model.named_parameters()), None
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   pipeline="dear", model=model,
                                   bucket_bytes=int(bucket_mb * (1 << 20)),
                                   tune_bucket_size=config == "dear_tuned")
    return model, opt, opt.flush


def timed_run(hvd, args, model_name, config, bucket_mb):
    """samples/s over every rank for one configuration (and the bucket size it ended with)."""
    net, opt, flush = build_run(hvd, args, model_name, config, bucket_mb)
    x, y = make_batch(model_name, args.batch, hvd.rank())

    marks = []    # per step: forward start, forward end, backward end, step() end

    def step():
        opt.zero_grad()
        t0 = time.time()
        loss = loss_fn(model_name, net(x), y)
        t1 = time.time()
        loss.backward()
        t2 = time.time()
        opt.step()
        marks.append([int(t * 1e6) for t in (t0, t1, t2, time.time())])
    warmup = args.warmup
    if config == "dear_tuned":   # the tuner's trials (about 55 steps) run untimed
        t = opt.tuner
        warmup = max(warmup, t.warmup + t.trials * t.per_trial + 1)
    for _ in range(warmup):
        step()
    hvd.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if flush is not None:
        flush()
    hvd.barrier()
    elapsed = time.perf_counter() - start
    if args.phases and hvd.rank() == 0:
        import json
        with open(args.phases, "a") as f:
            f.write(json.dumps({"model": model_name, "config": config, "bucket_mb": bucket_mb,
                                "timed": marks[-args.steps:]}) + "\n")
    used_mb = opt.bucket_bytes / (1 << 20) if config.startswith("dear") else bucket_mb
    return args.steps * args.batch * hvd.size() / elapsed, used_mb


def configurations(args):
    sizes = [float(s) for s in args.bucket_mb.split(",") if s]
    out = []
    for config in args.configs.split(","):
        if config == "hvd":
            out.append((config, None))
        elif config in ("dear", "dear_tuned", "ddp"):
            out.extend((config, mb) for mb in (sizes if config != "dear_tuned" else sizes[:1]))
        elif config:
            raise SystemExit("unknown configuration %r" % config)
    return out


def main():
    global VOCAB
    args = parse()
    VOCAB = args.vocab
    if args.cluster and "HOROVOD_RANK" not in os.environ and "HVDSPARSE_RANK" not in os.environ:
        run_on_cluster(args)
    if args.np and "HOROVOD_RANK" not in os.environ and "HVDSPARSE_RANK" not in os.environ:
        relaunch(args)
    import torch
    import hvdsparse.torch as hvd
    torch.set_num_threads(args.threads)
    hvd.init()
    models = ["conv", "transformer"] if args.model == "all" else [args.model]
    if hvd.rank() == 0:
        print("model,config,np,batch,bucket_mb,steps,samples_per_s,vs_hvd,vs_ddp", flush=True)
    for model_name in models:
        results = {}
        for _ in range(args.reps):
            for config, mb in configurations(args):
                rate, used = timed_run(hvd, args, model_name, config, mb)
                results.setdefault((config, mb), []).append((rate, used))
        median = {k: statistics.median(r for r, _ in v) for k, v in results.items()}
        hvd_rate = median.get(("hvd", None))
        ddp_rates = {mb: r for (c, mb), r in median.items() if c == "ddp"}
        if hvd.rank() != 0:
            continue
        for (config, mb), rate in median.items():
            used = results[(config, mb)][-1][1]
            ddp = ddp_rates.get(mb, next(iter(ddp_rates.values()), None))
            print("%s,%s,%d,%d,%s,%d,%.2f,%s,%s" % (
                model_name, config, hvd.size(), args.batch,
                "" if used is None else "%g" % used, args.steps, rate,
                "%.3f" % (rate / hvd_rate) if hvd_rate else "",
                "%.3f" % (rate / ddp) if ddp else ""), flush=True)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass
    hvd.shutdown()


if __name__ == "__main__":
    main()
