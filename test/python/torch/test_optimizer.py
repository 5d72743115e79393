"""DistributedOptimizer and the state helpers.

Equivalence: at np N with 1/N of each batch per rank, parameters match a plain-torch run on the
full batch (computed inside each rank as the np 1 reference)."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import hvdsparse.torch as hvd


def make_model(dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 4)).to(dtype)


def batches(steps, micro, per_rank, dtype):
    """The same global data on every rank: steps x micro batches of per_rank * size rows."""
    g = torch.Generator().manual_seed(1234)
    n = per_rank * hvd.size()
    return [[(torch.randn(n, 8, generator=g, dtype=dtype), torch.randn(n, 4, generator=g,
                                                                       dtype=dtype))
             for _ in range(micro)] for _ in range(steps)]


def run_pair(make_opt, dtype=torch.float64, steps=5, bpps=1, compression=hvd.Compression.none,
             **kwargs):
    """Returns (distributed model, reference model) after `steps` optimizer steps."""
    size, rank = hvd.size(), hvd.rank()
    model = make_model(dtype)
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   compression=compression, backward_passes_per_step=bpps,
                                   **kwargs)
    ref_opt = make_opt(ref.parameters())
    per_rank = 3
    for micro_batches in batches(steps, bpps, per_rank, dtype):
        opt.zero_grad()
        ref_opt.zero_grad()
        for x, y in micro_batches:
            lo = rank * per_rank
            F.mse_loss(model(x[lo:lo + per_rank]), y[lo:lo + per_rank]).backward()
            F.mse_loss(ref(x), y).backward()  # mean over the full batch = mean of rank means
        opt.step()
        ref_opt.step()
    assert size > 1
    return model, ref


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


SGD = lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9)  # noqa: E731
ADAM = lambda params: torch.optim.Adam(params, lr=0.01)  # noqa: E731


@pytest.mark.parametrize("name,make_opt", [("sgd_momentum", SGD), ("adam", ADAM)])
@pytest.mark.parametrize("bpps", [1, 2])
def test_equivalence_with_full_batch(name, make_opt, bpps):
    model, ref = run_pair(make_opt, bpps=bpps)
    diff = max_diff(model, ref)
    print("equivalence %s bpps=%d np=%d: max |diff| = %.3g" % (name, bpps, hvd.size(), diff))
    assert diff < 1e-6


@pytest.mark.parametrize("name,make_opt", [("sgd_momentum", SGD), ("adam", ADAM)])
def test_equivalence_fp32(name, make_opt):
    model, ref = run_pair(make_opt, dtype=torch.float32)
    diff = max_diff(model, ref)
    print("equivalence fp32 %s np=%d: max |diff| = %.3g" % (name, hvd.size(), diff))
    assert diff < 1e-5


@pytest.mark.parametrize("comp", [hvd.Compression.fp16, hvd.Compression.bf16])
def test_equivalence_compression(comp):
    model, ref = run_pair(SGD, dtype=torch.float32, compression=comp)
    diff = max_diff(model, ref)
    print("equivalence %s SGD np=%d: max |diff| = %.3g" % (comp.__name__, hvd.size(), diff))
    assert diff < (2e-3 if comp is hvd.Compression.fp16 else 2e-2)


@pytest.mark.parametrize("kwargs", [{"groups": 2}, {"num_groups": 3}, {"op": hvd.Sum},
                                    {"gradient_predivide_factor": 2.0}])
def test_equivalence_options(kwargs):
    if "groups" in kwargs or "num_groups" in kwargs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            model, ref = run_pair(SGD, **kwargs)
        assert max_diff(model, ref) < 1e-6
    elif kwargs.get("op") == hvd.Sum:
        # Sum of per-rank means: the reference uses lr * size.
        size = hvd.size()
        model, ref = run_pair(lambda p: torch.optim.SGD(p, lr=0.1 / size), op=hvd.Sum)
        ref2 = make_model()
        opt = torch.optim.SGD(ref2.parameters(), lr=0.1)
        for mb in batches(5, 1, 3, torch.float64):
            opt.zero_grad()
            F.mse_loss(ref2(mb[0][0]), mb[0][1]).backward()
            opt.step()
        assert max_diff(model, ref2) < 1e-6
    else:
        model, ref = run_pair(SGD, **kwargs)
        assert max_diff(model, ref) < 1e-6


def test_explicit_groups_and_unused_parameter():
    model = make_model()
    extra = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))  # never used: zero gradient
    params = list(model.parameters()) + [extra]
    named = list(model.named_parameters()) + [("extra", extra)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1), named_parameters=named,
                                   groups=[[params[0], params[1]], [params[2], params[3]]])
    x = torch.randn(4, 8, dtype=torch.float64) * (hvd.rank() + 1)
    model(x).sum().backward()
    opt.step()
    assert extra.grad is not None and torch.equal(extra.grad, torch.zeros(3, dtype=torch.float64))
    g = params[0].grad.clone()
    assert torch.allclose(hvd.allreduce(g, op=hvd.Max), g)  # same gradient everywhere


def test_optimizer_errors_and_warnings():
    model = make_model()
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("same", p) for _, p in named])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=named[:1])
    with pytest.raises(ValueError, match="tuples"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[p for _, p in named])
    with pytest.raises(ValueError, match="predivide"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 op=hvd.Sum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 compression=hvd.Compression.topk(0.1))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.SGD)
    model(torch.randn(2, 8, dtype=torch.float64)).sum().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        model(torch.randn(2, 8, dtype=torch.float64)).sum().backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        opt.step()
    # gradient clipping between synchronize() and step()
    opt.zero_grad()
    model(torch.randn(2, 8, dtype=torch.float64)).sum().backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with opt.skip_synchronize():
            opt.step()
    opt.set_backward_passes_per_step(2)
    opt.zero_grad()
    model(torch.randn(2, 8, dtype=torch.float64)).sum().backward()
    model(torch.randn(2, 8, dtype=torch.float64)).sum().backward()
    opt.step()


def test_sparse_embedding_gradients():
    for sparse_as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 3, sparse=True).double()
        ref = copy.deepcopy(emb)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=0.5),
                                       named_parameters=emb.named_parameters(),
                                       sparse_as_dense=sparse_as_dense)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
        idx = [torch.tensor([r, r + 1, 7]) for r in range(hvd.size())]
        emb(idx[hvd.rank()]).sum().backward()
        opt.step()
        (sum(ref(i).sum() for i in idx) / hvd.size()).backward()
        ref_opt.step()
        assert torch.allclose(emb.weight, ref.weight, atol=1e-12)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients_reach_the_optimizer_sparse(sparse_as_dense):
    """As Horovod: a sparse gradient comes back sparse (SparseAdam takes nothing else), also
    when sparse_as_dense=True reduces it as a dense tensor."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    ref = copy.deepcopy(emb)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    ref_opt = torch.optim.SparseAdam(list(ref.parameters()), lr=0.1)
    idx = [torch.tensor([r, r + 1, 7]) for r in range(hvd.size())]
    for _ in range(2):
        opt.zero_grad()
        emb(idx[hvd.rank()]).sum().backward()
        opt.synchronize()
        assert emb.weight.grad.is_sparse
        with opt.skip_synchronize():
            opt.step()
        ref_opt.zero_grad()
        (sum(ref(i).sum() for i in idx) / hvd.size()).backward()
        ref_opt.step()
    assert torch.allclose(emb.weight, ref.weight, atol=1e-12)


def test_optimizer_on_a_process_set_leaves_the_other_ranks_gradients_alone():
    """As Horovod: members average over the set; the other ranks step on their own gradient."""
    size, rank = hvd.size(), hvd.rank()
    evens = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    try:
        w = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
        opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0), named_parameters=[("w", w)],
                                       process_set=evens)
        (w * (rank + 1)).sum().backward()
        opt.step()
        members = range(0, size, 2)
        grad = sum(r + 1 for r in members) / len(members) if rank % 2 == 0 else rank + 1
        assert torch.equal(w.data, torch.full((3,), -float(grad), dtype=torch.float64))
    finally:
        hvd.remove_process_set(evens)


def test_broadcast_parameters_and_optimizer_state():
    rank = hvd.rank()
    model = make_model(seed=rank)  # different on every rank
    root = make_model(seed=0)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    assert max_diff(model, root) == 0
    model2 = make_model(seed=rank + 10)
    hvd.broadcast_parameters(list(model2.named_parameters()), root_rank=hvd.size() - 1)
    ref = make_model(seed=hvd.size() - 1 + 10)
    assert max_diff(model2, ref) == 0
    for make_opt in (lambda p: torch.optim.SGD(p, lr=0.1 * (rank + 1), momentum=0.9),
                     lambda p: torch.optim.Adam(p, lr=0.01 * (rank + 1), betas=(0.8, 0.9))):
        m = make_model(seed=0)
        opt = make_opt(m.parameters())
        m(torch.randn(3, 8, dtype=torch.float64) * (rank + 1)).sum().backward()
        opt.step()  # rank-dependent state
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        assert opt.param_groups[0]["lr"] == pytest.approx(make_opt([torch.zeros(1)])
                                                          .param_groups[0]["lr"] / (rank + 1))
        for p in m.parameters():
            for key, value in opt.state[p].items():
                if torch.is_tensor(value):
                    assert torch.equal(hvd.broadcast(value, 0), value), key
    # fresh optimizers (no state yet) and a DistributedOptimizer: parameters stay unchanged
    m = make_model(seed=0)
    before = copy.deepcopy(m)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9,
                                                   weight_decay=0.1),
                                   named_parameters=m.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert max_diff(m, before) == 0
    assert all("momentum_buffer" in opt.state[p] for p in m.parameters())
    with pytest.raises(ValueError, match="LBFGS"):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(m.parameters()), 0)


def test_broadcast_optimizer_state_leaves_zero_gradients_where_there_were_none():
    """As Horovod: a fresh optimizer's state comes from a zero-gradient step, and the
    parameters that had no gradient keep that zero gradient (a tensor that can be broadcast);
    parameters that need no gradient keep None."""
    torch.manual_seed(hvd.rank())
    frozen = torch.nn.Parameter(torch.tensor([1, 3], dtype=torch.int32), requires_grad=False)
    weight = torch.nn.Parameter(torch.rand(4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([frozen, weight], lr=0.001,
                                                   weight_decay=1e-6, momentum=0.9,
                                                   nesterov=True),
                                   named_parameters=[("frozen", frozen), ("weight", weight)])
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert frozen.grad is None
    assert torch.equal(weight.grad, torch.zeros(4))
    assert torch.equal(hvd.broadcast(weight.grad, root_rank=0), weight.grad)


def test_broadcast_optimizer_state_gives_sparse_adam_sparse_zero_gradients():
    emb = torch.nn.Embedding(10, 3, sparse=True)
    opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert emb.weight.grad.is_sparse
    assert "exp_avg" in opt.state[emb.weight]


def test_broadcast_and_allgather_object():
    obj = {"hello": 123, 0: [1, 2]} if hvd.rank() == 0 else {}
    assert hvd.broadcast_object(obj, root_rank=0) == {"hello": 123, 0: [1, 2]}
    fn = hvd.broadcast_object((lambda x: x + 1) if hvd.rank() == 0 else None, 0, name="fn")
    assert fn(1) == 2
    d = {"metric": hvd.rank()}
    if hvd.rank() == 1:
        d["extra"] = 42
    results = hvd.allgather_object(d)
    expected = [{"metric": i} for i in range(hvd.size())]
    expected[1]["extra"] = 42
    assert results == expected
