"""hvd.elastic outside an elastic job's failures: TorchState's save/restore/sync/commit, the
ElasticSampler's bookkeeping and repartitioning, and elastic.run's retry loop (the end-to-end
runs with killed and added workers are in test/python/elastic/)."""
import torch
from torch.utils.data import DataLoader

import hvdsparse.torch as hvd
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


def linear(value):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def values(model):
    return [t.detach().clone() for t in model.state_dict().values()]


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_state_syncs_from_rank_0_restores_and_commits():
    model = linear(1.0 if hvd.rank() == 0 else 5.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model, optimizer, batch=20 + hvd.rank(), epoch=10 + hvd.rank())
    state.sync()
    synced = values(model)
    assert all(torch.all(t == 1.0) for t in synced)
    assert (state.batch, state.epoch) == (20, 10)
    assert state.model is model and state.optimizer is optimizer
    # Changed, then restored: back to what sync gave.
    model.load_state_dict(linear(7.0).state_dict())
    state.batch, state.epoch = 21, 11
    state.restore()
    assert same(values(model), synced)
    assert (state.batch, state.epoch) == (20, 10)
    # Changed and committed, changed again, restored: back to the commit.
    model.load_state_dict(linear(7.0).state_dict())
    state.batch = 22
    state.commit()
    model.load_state_dict(linear(9.0).state_dict())
    state.batch = 23
    state.restore()
    assert all(torch.all(t == 7.0) for t in values(model))
    assert state.batch == 22


def test_optimizer_state_is_committed_and_restored():
    model = linear(1.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer)
    state.sync()

    def step():
        optimizer.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        optimizer.step()

    step()
    state.commit()
    momentum = [optimizer.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    weights = values(model)
    step()
    state.restore()
    assert same(values(model), weights)
    assert same([optimizer.state[p]["momentum_buffer"] for p in model.parameters()], momentum)
    step()  # the optimizer still works after a restore


class Numbers(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i

    def __len__(self):
        return self.n


def test_sampler_records_restores_and_repartitions():
    per_rank, bs = 8, 2
    dataset = Numbers(per_rank * hvd.size())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
    loader = DataLoader(dataset, batch_size=bs, sampler=sampler)
    state = hvd.elastic.TorchState(sampler=sampler)
    state.sync()
    assert (sampler.epoch, sampler.processed_indices) == (0, set())
    sampler.set_epoch(1)
    for i, batch in enumerate(loader):
        assert sampler.get_indices(i, bs) == batch.tolist()
        sampler.record_batch(i, bs)
        assert len(sampler.processed_indices) == bs * (i + 1)
        assert sampler.processed_num == bs * (i + 1) * hvd.size()  # Horovod 0.28's job count
    assert len(sampler) == per_rank
    # Every rank saw its own part: together, the whole dataset once.
    mine = hvd.allgather_object(sorted(sampler.processed_indices))
    assert sorted(i for part in mine for i in part) == list(range(len(dataset)))

    sampler.set_epoch(2)
    list(loader)
    sampler.record_batch(0, bs)
    state.commit()
    committed = set(sampler.processed_indices)
    sampler.record_batch(1, bs)
    assert sampler.processed_num == 2 * bs * hvd.size()
    state.restore()
    assert sampler.processed_indices == committed
    assert sampler.processed_num == bs * hvd.size()
    sampler.record_batch(1, bs)
    state.commit()
    state.sync()  # unites what every rank processed
    assert len(sampler.processed_indices) == sampler.processed_num == 2 * bs * hvd.size()
    assert len(sampler) == per_rank - 2 * bs
    left = [i for b in loader for i in b.tolist()]
    assert not set(left) & sampler.processed_indices
    every = hvd.allgather_object(left)
    assert len({i for part in every for i in part}) == len(dataset) - 2 * bs * hvd.size()
    sampler.set_epoch(3)
    assert len(sampler) == per_rank and sampler.processed_num == 0


def test_commit_outside_an_elastic_job_never_interrupts():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    for _ in range(3):
        state.step += 1
        state.commit()
    assert state.step == 3
    # Horovod's queue of host changes, which scripts poll (its elastic tests do): none here
    assert state._host_messages.empty()
    state._last_updated_timestamp = 0


def test_run_restores_after_an_internal_error_and_retries():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=5)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state, fail_first):
        calls.append(state.step)
        state.step += 1
        if fail_first and len(calls) == 1:
            raise HorovodInternalError("a peer failed")
        state.commit()
        return state.step

    assert train(state, True) == 6  # the first try's step was rolled back
    assert calls == [5, 5]
    assert resets == [hvd.size()] and hvd.is_initialized()


def test_run_keeps_the_state_after_hosts_updated():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    calls = []

    @hvd.elastic.run
    def train(state, skip_sync):
        calls.append(state.step)
        state.step += 1
        if len(calls) == 1:
            state.commit()
            state.step += 10  # not committed: a sync brings the commit back, nothing restores
            raise HostsUpdatedInterrupt(skip_sync)
        return state.step

    assert train(state, False) == 2 and calls == [0, 1]
    calls.clear()
    # run's first sync brings back the last commit (step 1); skip_sync keeps the uncommitted 12.
    assert train(state, True) == 13 and calls == [1, 12]
