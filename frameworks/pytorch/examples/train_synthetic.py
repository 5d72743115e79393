"""Training on synthetic data that visibly converges: a small MLP learns a fixed random
teacher network. Rank 0 prints the loss (averaged over ranks) and samples/s each epoch.

    hvdsparse run -np 2 python3 train_synthetic.py --epochs 5
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import hvdsparse.torch as hvd

parser = argparse.ArgumentParser(description="hvdsparse synthetic training example")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--samples", type=int, default=16384, help="training set size (all ranks)")
parser.add_argument("--batch-size", type=int, default=64, help="per-rank batch size")
parser.add_argument("--lr", type=float, default=0.01, help="learning rate per rank")
parser.add_argument("--fp16-allreduce", action="store_true")
parser.add_argument("--seed", type=int, default=42)


def make_data(n, seed):
    """Inputs and targets from a fixed random teacher; identical on every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    w1, w2 = torch.randn(32, 64, generator=g), torch.randn(64, 1, generator=g)
    y = torch.tanh(x @ w1 / 32 ** 0.5) @ w2 / 8
    return x, y


def main():
    args = parser.parse_args()
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())  # different init on purpose: broadcast fixes it
    torch.set_num_threads(max(1, torch.get_num_threads() // max(1, hvd.local_size())))
    x, y = make_data(args.samples, args.seed)
    # Each rank trains on its own shard.
    x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]

    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size() ** 0.5)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    if hvd.rank() == 0:
        print("training on %d ranks, %d samples per rank, batch %d per rank"
              % (hvd.size(), x.shape[0], args.batch_size), flush=True)
    for epoch in range(1, args.epochs + 1):
        g = torch.Generator().manual_seed(args.seed + epoch)
        order = torch.randperm(x.shape[0], generator=g)
        start, total, batches = time.perf_counter(), 0.0, 0
        for i in range(0, x.shape[0] - args.batch_size + 1, args.batch_size):
            idx = order[i:i + args.batch_size]
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
        elapsed = time.perf_counter() - start
        mean_loss = hvd.allreduce(torch.tensor(total / batches), name="epoch_loss").item()
        samples = hvd.allreduce(torch.tensor(float(batches * args.batch_size)), op=hvd.Sum,
                                name="epoch_samples").item()
        if hvd.rank() == 0:
            print("epoch %d: loss %.5f, %.0f samples/s" % (epoch, mean_loss, samples / elapsed),
                  flush=True)


if __name__ == "__main__":
    main()
