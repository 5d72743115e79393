"""A training script written against Horovod's API and nothing else: run under
`hvdsparse run --horovod-alias`, `import horovod.torch` must load hvdsparse and train.
Exits non-zero on any mismatch, so the launcher fails the test."""
import torch
import torch.nn.functional as F

import horovod.torch as hvd
from horovod.common.exceptions import HorovodInternalError  # noqa: F401  (Horovod's path)

hvd.init()
assert hvd.__name__ in ("horovod.torch", "hvdsparse.torch"), hvd.__name__
assert hvd.size() >= 2 and 0 <= hvd.rank() < hvd.size()
torch.manual_seed(1234 + hvd.rank())

model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), hvd.SyncBatchNorm(8), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                            torch.nn.Linear(8, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=hvd.Compression.fp16, op=hvd.Average)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

data = torch.randn(16, 3, 12, 12)
target = torch.randint(0, 10, (16,))
losses = []
for step in range(15):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    losses.append(hvd.allreduce(loss.detach(), name="loss").item())

# Parameters stay identical on every rank.
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = hvd.allgather(flat.unsqueeze(0), name="params")
assert torch.allclose(gathered[0], gathered[-1]), "ranks diverged"
assert losses[-1] < losses[0], losses
if hvd.rank() == 0:
    print("horovod-style script trained: loss %.4f -> %.4f" % (losses[0], losses[-1]))
