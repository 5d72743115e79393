"""An elastic torch job for elastic_test.py: a linear model trained for STEPS steps, one commit a
step. Optional events, each set by an environment variable:
  ELASTIC_TEST_KILL_AT=S    at step S, while the job has ELASTIC_TEST_KILL_SIZE ranks (default
                            3), rank ELASTIC_TEST_KILL_RANK (default 2) SIGKILLs itself
  ELASTIC_TEST_DROP_AT=S    at step S, while the job has ELASTIC_TEST_KILL_SIZE ranks, rank
                            ELASTIC_TEST_KILL_RANK prints "DROP LINK AT <time>" and waits 1 s
                            for whoever watches the output to cut its host off the network
  ELASTIC_TEST_DIE_IN_RECOVERY=1  rank 2 of 4 SIGKILLs itself 1 s into the reset that follows,
                            while the others wait for it in the new membership's rendezvous
  ELASTIC_TEST_KILL_AGAIN_AT=S  at step S, while the job has 2 ranks, its rank 1 SIGKILLs itself
  ELASTIC_TEST_SHRINK_AT=S  at step S, while the job has ELASTIC_TEST_SHRINK_SIZE ranks (3),
                            rank 0 makes the hosts file list ELASTIC_TEST_SHRINK_HOSTS only
                            (default "localhost:2", comma-separated)
  ELASTIC_TEST_GROW_AT=S    at step S, while the job has ELASTIC_TEST_GROW_SIZE ranks (2), rank 0
                            adds ELASTIC_TEST_GROW_HOST (default "127.0.0.1:1") to the hosts file
                            the discovery script prints (ELASTIC_TEST_HOSTS_FILE)
ELASTIC_TEST_COMMIT_EVERY=K commits every K steps (default 1).
ELASTIC_TEST_HOROVOD=1 imports horovod.torch (horovodrun's alias) instead of hvdsparse.torch.
Prints "STEP <step> SIZE <size> AT <time>" per step, "COMMIT <step>" per commit, "SYNCED
SIZE <size> STEP <step> EQUAL <params equal on every rank>" each time training (re)starts,
"KILLED AT <time>" and, at the end,
"DONE STEP <step> SIZE <size> RANK <rank> EQUAL <params equal on every rank>".
"""
import os
import signal
import time

import torch

from hvdsparse.common import basics

if os.environ.get("ELASTIC_TEST_HOROVOD") == "1":  # a Horovod script, under horovodrun's alias
    import horovod.torch as hvd
else:
    import hvdsparse.torch as hvd

STEPS = int(os.environ.get("ELASTIC_TEST_STEPS", "40"))
KILL_AT = int(os.environ.get("ELASTIC_TEST_KILL_AT", "-1"))
KILL_SIZE = int(os.environ.get("ELASTIC_TEST_KILL_SIZE", "3"))
DIE_IN_RECOVERY = os.environ.get("ELASTIC_TEST_DIE_IN_RECOVERY") == "1"
KILL_RANK = int(os.environ.get("ELASTIC_TEST_KILL_RANK", "2"))
DROP_AT = int(os.environ.get("ELASTIC_TEST_DROP_AT", "-1"))
KILL_AGAIN_AT = int(os.environ.get("ELASTIC_TEST_KILL_AGAIN_AT", "-1"))
SHRINK_AT = int(os.environ.get("ELASTIC_TEST_SHRINK_AT", "-1"))
GROW_AT = int(os.environ.get("ELASTIC_TEST_GROW_AT", "-1"))
GROW_SIZE = int(os.environ.get("ELASTIC_TEST_GROW_SIZE", "2"))
GROW_HOST = os.environ.get("ELASTIC_TEST_GROW_HOST", "127.0.0.1:1")
SHRINK_SIZE = int(os.environ.get("ELASTIC_TEST_SHRINK_SIZE", "3"))
SHRINK_HOSTS = os.environ.get("ELASTIC_TEST_SHRINK_HOSTS", "localhost:2").split(",")
COMMIT_EVERY = int(os.environ.get("ELASTIC_TEST_COMMIT_EVERY", "1"))
STEP_SLEEP = float(os.environ.get("ELASTIC_TEST_STEP_SLEEP", "0.02"))

hvd.init()
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model, optimizer, step=0)
resets = []
state.register_reset_callbacks([lambda: resets.append(hvd.size())])


identity = {}  # rank and size before the last shutdown


def die_in_recovery(event):
    if event == "shutdown" and identity.get("was") == (2, 4):
        time.sleep(1.0)
        print("KILLED IN RECOVERY AT %.6f" % time.time(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if DIE_IN_RECOVERY:
    basics.register_reset_hook(die_in_recovery)


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(8, 16, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def params_equal():
    """Whether every rank holds the same parameters: an allgather of a checksum."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    check = torch.stack([flat.sum(), (flat * torch.arange(1, flat.numel() + 1)).sum()])
    every = hvd.allgather(check.unsqueeze(0), name="elastic_test.checksum")
    return all(torch.equal(every[0], every[r]) for r in range(every.shape[0]))


@hvd.elastic.run
def train(state):
    print("SYNCED SIZE %d STEP %d EQUAL %s" % (hvd.size(), state.step, params_equal()), flush=True)
    while state.step < STEPS:
        if state.step == KILL_AT and hvd.size() == KILL_SIZE and hvd.rank() == KILL_RANK:
            print("KILLED AT %.6f" % time.time(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if state.step == DROP_AT and hvd.size() == KILL_SIZE and hvd.rank() == KILL_RANK:
            print("DROP LINK AT %.6f" % time.time(), flush=True)
            time.sleep(1.0)
        if state.step == KILL_AGAIN_AT and hvd.size() == 2 and hvd.rank() == 1:
            print("KILLED AGAIN AT %.6f" % time.time(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if state.step == GROW_AT and hvd.rank() == 0 and hvd.size() == GROW_SIZE:
            with open(os.environ["ELASTIC_TEST_HOSTS_FILE"], "a") as f:
                f.write(GROW_HOST + "\n")
            print("GREW AT %.6f" % time.time(), flush=True)
        if state.step == SHRINK_AT and hvd.rank() == 0 and hvd.size() == SHRINK_SIZE:
            with open(os.environ["ELASTIC_TEST_HOSTS_FILE"], "w") as f:
                f.write("".join(h + "\n" for h in SHRINK_HOSTS))
            print("SHRANK AT %.6f" % time.time(), flush=True)
        identity["was"] = (hvd.rank(), hvd.size())
        x, y = batch(state.step, hvd.rank())
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        state.step += 1
        print("STEP %d SIZE %d AT %.6f" % (state.step, hvd.size(), time.time()), flush=True)
        time.sleep(STEP_SLEEP)
        if state.step % COMMIT_EVERY == 0:
            state.commit()
            print("COMMIT %d" % state.step, flush=True)


train(state)
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every = hvd.allgather(flat.unsqueeze(0))
equal = all(torch.equal(every[0], every[r]) for r in range(every.shape[0]))
print("DONE STEP %d SIZE %d RANK %d EQUAL %s RESETS %s" % (state.step, hvd.size(), hvd.rank(),
                                                           equal, resets), flush=True)
hvd.shutdown()
