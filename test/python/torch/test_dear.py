"""DistributedOptimizer(pipeline="dear"): reduce-scatter in backward, all-gather + update in the
next forward. Every training test runs the same per-rank data through DeAR and through the
ordinary DistributedOptimizer and requires the same parameters (float32, 1e-5)."""
import copy
import math
import time

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import hvdsparse.torch as hvd
from hvdsparse.torch import dear
from hvdsparse.torch.dear.planner import plan_buckets

TOL = 1e-5
SMALL = 2000         # bytes: three buckets on the test model
FIRST = 600          # bytes: a small first bucket


class Net(torch.nn.Module):
    """Three layers; optional extras exercise unused parameters, a module called twice and
    activation checkpointing."""

    def __init__(self, mode="plain"):
        super().__init__()
        self.mode = mode
        self.inp = torch.nn.Linear(8, 16)
        self.mid = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.out = torch.nn.Linear(16, 4)
        self.extra = torch.nn.Linear(16, 16)       # used only in mode "unused", sometimes
        self.never = torch.nn.Linear(16, 16)       # never used
        self.step = 0

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        if self.mode == "twice":
            h = torch.tanh(self.mid(torch.tanh(self.mid(h))))
        elif self.mode in ("ckpt", "ckpt_reentrant") and torch.is_grad_enabled():
            h = checkpoint(lambda t: torch.tanh(self.mid(t)), h,
                           use_reentrant=self.mode == "ckpt_reentrant")
        else:
            h = torch.tanh(self.mid(h))
        if self.mode == "unused" and (self.step + hvd.rank()) % 3 == 0:
            h = h + torch.tanh(self.extra(h))
        return self.out(self.norm(h))


def make_pair(mode, make_opt, bpps=1, **dear_kwargs):
    torch.manual_seed(0)
    model = Net(mode)
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=bpps, pipeline="dear", model=model,
                                   **dear_kwargs)
    ref_opt = hvd.DistributedOptimizer(make_opt(ref.parameters()),
                                       named_parameters=ref.named_parameters(),
                                       backward_passes_per_step=bpps)
    return model, opt, ref, ref_opt


def rank_data(steps, micro, seed=7):
    g = torch.Generator().manual_seed(seed + 101 * hvd.rank())
    return [[(torch.randn(3, 8, generator=g), torch.randn(3, 4, generator=g))
             for _ in range(micro)] for _ in range(steps)]


def train(model, opt, data, evals=None, after_step=None):
    """One loop for both optimizers; returns the evaluation outputs (with and without grad)."""
    outputs = []
    for k, micro in enumerate(data):
        model.step = k
        opt.zero_grad()
        for x, y in micro:
            F.mse_loss(model(x), y).backward()
        opt.step()
        if after_step is not None:
            after_step(k, opt)
        if evals is not None and k % 4 == 1:
            with torch.no_grad():
                outputs.append(model(evals))           # pre-hooks apply under no_grad too
        if evals is not None and k % 4 == 3:
            outputs.append(model(evals).detach())      # an eval forward with grad enabled
    return outputs


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def run_both(mode, make_opt, steps=20, bpps=1, after_step=None, **dear_kwargs):
    model, opt, ref, ref_opt = make_pair(mode, make_opt, bpps, **dear_kwargs)
    data = rank_data(steps, bpps)
    evals = torch.randn(2, 8, generator=torch.Generator().manual_seed(3))
    got = train(model, opt, data, evals, after_step)
    want = train(ref, ref_opt, data, evals, after_step)
    opt.flush()
    for a, b in zip(got, want):
        assert (a - b).abs().max().item() < TOL
    return model, opt, ref, ref_opt


SGD = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)                 # noqa: E731
ADAM = lambda p: torch.optim.Adam(p, lr=0.01)                            # noqa: E731
ADAMW = lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)        # noqa: E731


@pytest.mark.parametrize("name,make_opt", [("sgd_momentum", SGD), ("adam", ADAM),
                                           ("adamw", ADAMW)])
@pytest.mark.parametrize("bpps", [1, 2])
def test_matches_ordinary_optimizer(name, make_opt, bpps):
    model, opt, ref, ref_opt = run_both("plain", make_opt, bpps=bpps, bucket_bytes=SMALL,
                                        first_bucket_bytes=FIRST)
    diff = max_diff(model, ref)
    print("dear %s bpps=%d np=%d: %d buckets, max |diff| = %.3g"
          % (name, bpps, hvd.size(), len(opt.bucket_plan()), diff))
    assert len(opt.bucket_plan()) >= 3
    assert diff < TOL
    # Optimizer state (momentum, Adam moments) equals too; state_dict() flushes first.
    got, want = opt.state_dict()["state"], ref_opt.state_dict()["state"]
    assert sorted(got) == sorted(want)
    for index, state in want.items():
        for key, value in state.items():
            assert torch.is_tensor(value) and (got[index][key] - value).abs().max() < TOL


def test_updates_that_arrived_together_apply_in_one_call():
    """A forward that finds every all-gather arrived runs the optimizer once, not once per
    bucket (the first module's pre-hook takes the later buckets along), and the parameters
    still equal the ordinary optimizer's."""
    model, opt, ref, ref_opt = make_pair("plain", SGD, bucket_bytes=SMALL,
                                         first_bucket_bytes=FIRST)
    calls = []
    opt.register_step_post_hook(lambda *args: calls.append(1))
    data = rank_data(6, 1)
    per_forward = []
    for micro in data:
        opt.zero_grad()
        before = len(calls)
        for x, y in micro:
            F.mse_loss(model(x), y).backward()
        per_forward.append(len(calls) - before)
        opt.step()
        deadline = time.time() + 30
        while not all(b.all_gathered(opt._comm) for b in opt._buckets if b.pending()):
            assert time.time() < deadline, "all-gathers did not arrive"
            time.sleep(0.005)
    train(ref, ref_opt, data)
    opt.flush()
    assert len(opt.bucket_plan()) >= 3
    assert per_forward == [0] + [1] * (len(data) - 1)
    assert max_diff(model, ref) < TOL


@pytest.mark.parametrize("mode", ["unused", "twice", "ckpt", "ckpt_reentrant"])
def test_model_shapes(mode):
    """Unused parameters (rank-dependent), a module called twice, activation checkpointing."""
    model, _, ref, _ = run_both(mode, ADAM, steps=12, bucket_bytes=SMALL)
    assert max_diff(model, ref) < TOL


class Encoder(torch.nn.Module):
    """nn.MultiheadAttention reads out_proj.weight without calling out_proj, and the encoder
    layer's inference fast path calls none of its submodules."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Linear(8, 16)
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(1))


def test_transformer_encoder():
    # SGD: the key bias of attention has a zero gradient up to rounding, which Adam would blow
    # up to lr-sized steps; at np 3 the reduce-scatter and the allreduce round differently.
    torch.manual_seed(0)
    model = Encoder()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(SGD(model.parameters()),
                                   named_parameters=model.named_parameters(), pipeline="dear",
                                   model=model, bucket_bytes=4000)
    ref_opt = hvd.DistributedOptimizer(SGD(ref.parameters()),
                                       named_parameters=ref.named_parameters())
    g = torch.Generator().manual_seed(11 + hvd.rank())
    evals = torch.randn(2, 5, 8)
    for k in range(6):
        x, y = torch.randn(3, 5, 8, generator=g), torch.randn(3, 4, generator=g)
        outs = []
        for m, o in ((model, opt), (ref, ref_opt)):
            m.train()
            o.zero_grad()
            F.mse_loss(m(x), y).backward()
            o.step()
            if k % 2:                  # odd steps only: the others train on pending updates
                m.eval()
                with torch.inference_mode():
                    outs.append(m(evals))
        if outs:
            assert (outs[0] - outs[1]).abs().max().item() < TOL
    assert len(opt.bucket_plan()) >= 6
    opt.flush()
    assert max_diff(model, ref) < TOL


def test_learning_rate_change():
    """An LR change after flush(), and a scheduler stepped after step() without a flush (the
    update uses the hyper-parameters of its own step())."""
    def change(k, opt):
        if k == 5:
            if hasattr(opt, "flush"):
                opt.flush()
            for g in opt.param_groups:
                g["lr"] = 0.03
        if k >= 8:
            for g in opt.param_groups:
                g["lr"] *= 0.8
    model, _, ref, _ = run_both("plain", SGD, steps=14, after_step=change, bucket_bytes=SMALL)
    assert max_diff(model, ref) < TOL


def test_flush_and_checkpoint():
    """model.state_dict() right after step() already holds the update; flush() is idempotent;
    the broadcast helpers work on the DeAR optimizer."""
    model, opt, ref, ref_opt = make_pair("plain", SGD, bucket_bytes=SMALL)
    for m, o in ((model, opt), (ref, ref_opt)):
        hvd.broadcast_parameters(m.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(o, root_rank=0)
    for micro in rank_data(3, 1):
        for m, o in ((model, opt), (ref, ref_opt)):
            o.zero_grad()
            F.mse_loss(m(micro[0][0]), micro[0][1]).backward()
            o.step()
    sd, want = model.state_dict(), ref.state_dict()
    assert max((sd[k] - want[k]).abs().max().item() for k in want) < TOL
    opt.flush()
    opt.flush()
    assert max_diff(model, ref) < TOL


def test_synchronize_and_clip():
    """Horovod's synchronize() / skip_synchronize() still work (gradient clipping)."""
    model, opt, ref, ref_opt = make_pair("plain", ADAM, bucket_bytes=SMALL)
    for k, micro in enumerate(rank_data(6, 1)):
        for m, o in ((model, opt), (ref, ref_opt)):
            o.zero_grad()
            F.mse_loss(m(micro[0][0]), micro[0][1]).backward()
            if k % 2:
                o.step()
            else:
                o.synchronize()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)
                with o.skip_synchronize():
                    o.step()
    opt.flush()
    assert max_diff(model, ref) < TOL


class Mixed(torch.nn.Module):
    """Registered in the reverse of the forward order; one float64 layer between float32s."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Linear(6, 3)
        self.b = torch.nn.Linear(6, 6).double()
        self.a = torch.nn.Linear(4, 6)

    def forward(self, x, order=("a", "b", "c")):
        for name in order:
            layer = getattr(self, name)
            x = layer(x.to(layer.weight.dtype))
        return x.float()


def test_bucket_plan_identical_on_every_rank():
    torch.manual_seed(0)
    model = Mixed()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), pipeline="dear",
                                   model=model, bucket_bytes=64, first_bucket_bytes=16)
    x = torch.randn(2, 4)
    # A rank-specific first forward: the plan must still come from rank 0's trace.
    with torch.no_grad():
        if hvd.rank() == 0:
            model(x)
        else:
            model.c(model.b(torch.zeros(2, 6, dtype=torch.float64)).float())
            model.a(x)
    opt.step()
    for _ in range(2):
        opt.zero_grad()
        model(x * (hvd.rank() + 1)).sum().backward()
        opt.step()
    plan = opt.bucket_plan()
    assert hvd.allgather_object(plan) == [plan] * hvd.size()
    assert hvd.allgather_object(opt.launch_log) == [opt.launch_log] * hvd.size()
    names = [n for _, _, ns in plan for n in ns]
    assert names[:2] == ["a.weight", "a.bias"]                    # observed order, not modules()
    assert plan[0][2] == ("a.weight",)                             # small first bucket
    assert names.index("b.weight") < names.index("c.weight")
    for dtype, padded, ns in plan:
        assert padded % hvd.size() == 0
        assert {str(dict(model.named_parameters())[n].dtype) for n in ns} == {dtype}
    g = len(plan)
    rs = [i for kind, i in opt.launch_log if kind == "rs"]
    ag = [i for kind, i in opt.launch_log if kind == "ag"]
    assert rs == list(reversed(range(g))) and ag == list(range(g))
    assert opt.launch_log.index(("ag", 0)) == g                    # every RS before any AG


def test_buckets_never_split_a_layer():
    """Unit test (no ranks): a layer's parameters (one module) share a bucket, since backward
    produces them together: a weight that fills the threshold alone keeps its bias, which
    would otherwise wait in the next bucket for the backward of the layer before. A norm
    layer's few bytes ride with the next layer instead of making a bucket of their own."""
    seq = torch.nn.Sequential(torch.nn.Embedding(10, 16), torch.nn.Linear(16, 32),
                              torch.nn.Linear(32, 32), torch.nn.LayerNorm(32),
                              torch.nn.Linear(32, 4))
    named = list(seq.named_parameters())
    weight = 32 * 32 * 4                                    # bytes of 2.weight
    names = lambda plan: [[s.name for s in b.slots] for b in plan]          # noqa: E731
    plan = plan_buckets(named, weight, world_size=3)
    assert names(plan) == [["0.weight", "1.weight", "1.bias"], ["2.weight", "2.bias"],
                           ["3.weight", "3.bias", "4.weight", "4.bias"]]
    assert [b.index for b in plan] == [0, 1, 2]
    assert all(b.padded % 3 == 0 and b.padded - b.numel < 3 for b in plan)
    # first_bucket_bytes: bucket 0 holds as many layers as fit in it.
    plan = plan_buckets(named, weight, world_size=3, first_bucket_bytes=700)
    assert names(plan) == [["0.weight"], ["1.weight", "1.bias"], ["2.weight", "2.bias"],
                           ["3.weight", "3.bias", "4.weight", "4.bias"]]
    # The norm joins the layer after it although together they pass the threshold.
    sandwich = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.LayerNorm(32),
                                   torch.nn.Linear(32, 32))
    plan = plan_buckets(list(sandwich.named_parameters()), weight + 128, world_size=1)
    assert names(plan) == [["0.weight", "0.bias"], ["1.weight", "1.bias", "2.weight", "2.bias"]]
    # Many large tensors of one module are still cut at the threshold.
    plist = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(32, 32)) for _ in range(4)])
    top = [("w%d" % i, torch.nn.Parameter(torch.zeros(32, 32))) for i in range(3)]
    assert [len(b.slots) for b in plan_buckets(list(plist.named_parameters()) + top, weight,
                                               world_size=1)] == [1] * 7
    # A parameter of another dtype goes to a bucket of its own kind.
    mixed = named[:2] + [("x.half", torch.nn.Parameter(torch.zeros(8, dtype=torch.float64)))] \
        + named[2:]
    plan = plan_buckets(mixed, weight, world_size=1)
    assert [names([b]) for b in plan if b.dtype == torch.float64] == [[["x.half"]]]
    assert sorted(n for ns in names(plan) for n in ns) == sorted(n for n, _ in mixed)


@pytest.mark.parametrize("opt_x,scale", [(5.6, 1.0), (0.7, 3.0), (7.4, 0.5), (3.0, 1.0)])
def test_gp_ei_finds_optimum(opt_x, scale):
    """Unit test (no ranks): GP + EI finds a 1-D minimum in log2(MB) within 10 trials."""
    def f(x):
        return scale * ((x - opt_x) ** 2 + 0.3 * math.sin(3 * x)) + 5.0
    grid = [i / 1000 * 8 for i in range(1001)]
    truth = min(grid, key=f)
    best_x, _, xs = dear.minimize(f, 0.0, 8.0, trials=10, start=math.log2(25))
    assert len(xs) == 10
    assert abs(best_x - truth) < 0.35, (best_x, truth, xs)


def test_tuner_choice_identical_and_training_unchanged():
    """tune_bucket_size: trials rebuild the buckets between steps; every rank ends with rank
    0's choice and the parameters still match the ordinary optimizer."""
    model, opt, ref, _ = run_both("plain", SGD, steps=14, bucket_bytes=SMALL,
                                  tune_bucket_size=True, tune_trials=3, tune_steps_per_trial=3,
                                  tune_skip=1, tune_warmup=2)
    assert opt.tuner.done
    chosen = opt.bucket_bytes
    assert hvd.allgather_object(chosen) == [chosen] * hvd.size()
    assert (1 << 20) <= chosen <= (256 << 20) + 1
    assert max_diff(model, ref) < TOL


def test_errors():
    model = Net()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="model="):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                 pipeline="dear")
    with pytest.raises(ValueError, match="pipeline"):
        hvd.DistributedOptimizer(sgd, pipeline="bytescheduler")
    with pytest.raises(ValueError, match="groups"):
        hvd.DistributedOptimizer(sgd, pipeline="dear", model=model, groups=2)
    with pytest.raises(TypeError, match="bucket_bytes"):
        hvd.DistributedOptimizer(sgd, bucket_bytes=1 << 20)
    stray = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match="belong to no module"):
        hvd.DistributedOptimizer(torch.optim.SGD(list(model.parameters()) + [stray], lr=0.1),
                                 named_parameters=list(model.named_parameters()) +
                                 [("stray", stray)], pipeline="dear", model=model)
    opt = hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                   pipeline="dear", model=model)
    assert isinstance(opt, torch.optim.SGD)
    x = torch.randn(2, 8)
    model(x).sum().backward()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        model(x).sum().backward()
    opt.zero_grad()
    opt.set_backward_passes_per_step(1)
    opt.step()
    opt.flush()


def test_runs_through_the_ordered_lane_and_a_different_order_raises_everywhere():
    """DeAR's halves skip negotiation in the runtime's ordered lane: a reduce-scatter and an
    all-gather submitted in the same order give the right results; submitted in another order on
    one rank, both fail on every rank with a message that names that rank's operation, and the
    lane works again afterwards."""
    n = hvd.size()
    x = torch.arange(2.0 * n) + hvd.rank()
    h = hvd.reducescatter_async(x, name="lane.rs", op=hvd.Sum, ordered=True)
    shard = hvd.synchronize(h)
    start = 2 * hvd.rank()
    assert torch.equal(shard, n * torch.arange(start, start + 2.0) + n * (n - 1) / 2)
    whole = hvd.synchronize(hvd.allgather_async(shard, name="lane.ag", ordered=True))
    assert torch.equal(whole, n * torch.arange(2.0 * n) + n * (n - 1) / 2)
    if n < 2:
        return
    a, b = torch.ones(n), torch.ones(2 * n)
    order = [("lane.a", a), ("lane.b", b)] if hvd.rank() == 0 else [("lane.b", b), ("lane.a", a)]
    handles = [hvd.reducescatter_async(t, name=name, op=hvd.Sum, ordered=True)
               for name, t in order]
    for h, (name, _) in zip(handles, order):  # each names this rank's operation at its place
        with pytest.raises(hvd.HorovodInternalError,
                           match="Mismatched ordered operations.*rank %d submitted "
                           "REDUCESCATTER '[^']*%s'" % (hvd.rank(), name)):
            hvd.synchronize(h)
    again = hvd.synchronize(hvd.reducescatter_async(x, name="lane.again", op=hvd.Sum, ordered=True))
    assert torch.equal(again, shard)
