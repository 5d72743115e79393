"""An embedding-heavy click model (DLRM-like) on synthetic Zipf data, to compare sparse and
dense gradient synchronisation. Rank 0 prints the loss and samples/s per epoch.

    hvdsparse run -np 2 python3 train_embedding.py --sync sparse
    hvdsparse run -np 2 python3 train_embedding.py --sync dense

The model: --fields categorical features looked up in one table of --num-embeddings x
--embedding-dim rows (default 2^20 x 16: 64 MiB of float32), 13 dense features through a bottom
MLP, DLRM's pairwise dot-product interaction, a top MLP and a logistic loss. The ids follow a
Zipf law, so a batch touches a few thousand distinct rows of the million.

--sync sparse: nn.Embedding(sparse=True); its gradient (rows touched by the batch) goes through
  hvdsparse's sparse allreduce, the rest of the model through the ordinary allreduce.
--sync dense: nn.Embedding(sparse=False); the whole 64 MiB table gradient is allreduced.
--sync detect: dense gradients, but the table's allreduce may take the sparse path
  (DistributedOptimizer(sparse_params=["emb.weight"])).
Plain SGD updates only the touched rows either way, and every mode sees the same data from the
same seeds, so the losses agree to float32 rounding.

--horovod imports horovod.torch instead: the script then runs under Horovod itself, or under
hvdsparse's Horovod alias (horovodrun), for comparisons (only Horovod's API is used then).
"""
import argparse
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

if "--horovod" in sys.argv:
    import horovod.torch as hvd
else:
    import hvdsparse.torch as hvd

parser = argparse.ArgumentParser(description="hvdsparse embedding training example")
parser.add_argument("--sync", choices=["sparse", "dense", "detect"], default="sparse")
parser.add_argument("--sparse-algorithm", default=None,
                    help="force the sparse allreduce algorithm (default: the cost model)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=256, help="per-rank batch size")
parser.add_argument("--num-embeddings", type=int, default=1 << 20)
parser.add_argument("--embedding-dim", type=int, default=16)
parser.add_argument("--fields", type=int, default=8, help="categorical features per sample")
parser.add_argument("--zipf", type=float, default=1.2, help="Zipf exponent of the ids")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--horovod", action="store_true", help="import horovod.torch (see above)")

NUM_DENSE = 13


class ClickModel(nn.Module):
    def __init__(self, rows, dim, fields, sparse):
        super().__init__()
        self.emb = nn.Embedding(rows, dim, sparse=sparse)
        nn.init.normal_(self.emb.weight, std=0.05)
        self.bottom = nn.Sequential(nn.Linear(NUM_DENSE, 64), nn.ReLU(), nn.Linear(64, dim))
        pairs = (fields + 1) * fields // 2
        self.top = nn.Sequential(nn.Linear(dim + pairs, 64), nn.ReLU(), nn.Linear(64, 1))
        self.tri = torch.triu_indices(fields + 1, fields + 1, offset=1)

    def forward(self, dense, ids):
        x = self.bottom(dense)                                   # [B, D]
        vecs = torch.cat([x.unsqueeze(1), self.emb(ids)], 1)     # [B, F + 1, D]
        dots = torch.bmm(vecs, vecs.transpose(1, 2))             # [B, F + 1, F + 1]
        inter = dots[:, self.tri[0], self.tri[1]]                # [B, pairs]
        return self.top(torch.cat([x, inter], 1)).squeeze(1)


class Data:
    """Synthetic clicks: Zipf ids (hashed over the table) and a fixed hidden scorer."""

    def __init__(self, args):
        rng = np.random.RandomState(args.seed)
        self.rows, self.fields, self.a = args.num_embeddings, args.fields, args.zipf
        self.scramble = rng.permutation(self.rows)  # popular ids spread over the table
        self.score = rng.randn(self.rows).astype(np.float32)
        self.w = rng.randn(NUM_DENSE).astype(np.float32) / NUM_DENSE ** 0.5

    def batch(self, rng, n):
        ids = self.scramble[(rng.zipf(self.a, size=(n, self.fields)) - 1) % self.rows]
        dense = rng.randn(n, NUM_DENSE).astype(np.float32)
        logit = self.score[ids].sum(1) / self.fields ** 0.5 + dense @ self.w
        label = (rng.rand(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        return torch.from_numpy(dense), torch.from_numpy(ids), torch.from_numpy(label)


def epoch_batches(data, args, epoch):
    """This rank's slice of every global batch of the epoch (the same on every run)."""
    rng = np.random.RandomState(args.seed * 1000 + epoch)
    r, b = hvd.rank(), args.batch_size
    out = []
    for _ in range(args.steps_per_epoch):
        dense, ids, label = data.batch(rng, b * hvd.size())
        out.append((dense[r * b:(r + 1) * b], ids[r * b:(r + 1) * b], label[r * b:(r + 1) * b]))
    return out


def main():
    args = parser.parse_args()
    hvd.init()
    torch.set_num_threads(max(1, torch.get_num_threads() // max(1, hvd.local_size())))
    torch.manual_seed(args.seed)
    model = ClickModel(args.num_embeddings, args.embedding_dim, args.fields,
                       sparse=args.sync == "sparse")
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    extra = {"sparse_params": ["emb.weight"]} if args.sync == "detect" else {}
    if args.sparse_algorithm:
        extra["sparse_algorithm"] = args.sparse_algorithm
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr),
                                         named_parameters=model.named_parameters(), **extra)
    data = Data(args)
    if hvd.rank() == 0:
        print("sync %s: %d ranks, batch %d per rank, table %d x %d, %d fields, zipf %.2f"
              % (args.sync, hvd.size(), args.batch_size, args.num_embeddings,
                 args.embedding_dim, args.fields, args.zipf), flush=True)
    for epoch in range(1, args.epochs + 1):
        batches = epoch_batches(data, args, epoch)
        hvd.barrier()
        start, total = time.perf_counter(), 0.0
        for dense, ids, label in batches:
            optimizer.zero_grad()
            loss = F.binary_cross_entropy_with_logits(model(dense, ids), label)
            loss.backward()
            optimizer.step()
            total += loss.item()
        hvd.barrier()
        elapsed = time.perf_counter() - start
        mean_loss = hvd.allreduce(torch.tensor(total / len(batches), dtype=torch.float64),
                                  name="epoch_loss").item()
        if hvd.rank() == 0:
            samples = len(batches) * args.batch_size * hvd.size()
            print("epoch %d: loss %.6f, %.0f samples/s, %.1f ms/step"
                  % (epoch, mean_loss, samples / elapsed, 1000 * elapsed / len(batches)),
                  flush=True)


if __name__ == "__main__":
    main()
