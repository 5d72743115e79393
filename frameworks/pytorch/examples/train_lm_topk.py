"""An LSTM language model on synthetic text, to compare dense gradient averaging with top-k
sparsification (error feedback) through hvdsparse's sparse allreduce. Rank 0 prints the loss and
the step time.

    hvdsparse run -np 4 python3 train_lm_topk.py --compression none --steps 300
    hvdsparse run -np 4 python3 train_lm_topk.py --compression topk --ratio 0.01 --steps 300
    hvdsparse run -np 4 python3 train_lm_topk.py --compression topk --ratio 0.01 \\
        --quantize-bits 4 --steps 300

The model (defaults): embedding 10000 x 1024, one LSTM layer of 512, a 512 x 10000 decoder: about
18.5 M parameters, 74 MB of float32 gradient per step, and 4 sequences of 10 tokens per rank, so
that on a 1 Gbit/s link the dense allreduce dominates the step (about 1 s of a 1.2 s step on 4
hosts: docs/compression.md). The text comes from a fixed hidden process every rank knows: the
next token is one of 8 successors of the current token (Zipf-weighted; the successors follow a
Zipf law over the vocabulary), or uniform noise with probability --noise, so the loss can fall
well below ln(vocab).

--compression topk: hvd.Compression.topk(--ratio) with error feedback (residuals kept in the
optimizer); --topk-warmup N raises the sparsity geometrically from 25% to --ratio over the
first N steps, as DGC does; --min-numel N leaves smaller gradients (the biases) dense, as DGC
does. --quantize-bits 4: the sparse allreduce's gather phase moves its values 4-bit quantized
(docs/compression.md).
Every configuration sees the same batches, so the final losses are comparable.
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import hvdsparse.torch as hvd

parser = argparse.ArgumentParser(description="hvdsparse top-k language model example")
parser.add_argument("--compression", choices=["none", "topk"], default="topk")
parser.add_argument("--ratio", type=float, default=0.01, help="top-k: fraction sent")
parser.add_argument("--topk-warmup", type=int, default=0,
                    help="steps over which the ratio falls from 0.25 to --ratio (DGC warm-up)")
parser.add_argument("--min-numel", type=int, default=0,
                    help="top-k: gradients with fewer elements take the dense allreduce")
parser.add_argument("--quantize-bits", type=int, choices=[0, 2, 4, 8], default=0)
parser.add_argument("--sparse-algorithm", default=None,
                    help="force the sparse allreduce algorithm (default: the cost model)")
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--batch-size", type=int, default=4, help="per-rank sequences per step")
parser.add_argument("--seq-len", type=int, default=10)
parser.add_argument("--vocab", type=int, default=10000)
parser.add_argument("--embed", type=int, default=1024)
parser.add_argument("--hidden", type=int, default=512)
parser.add_argument("--layers", type=int, default=1)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--clip", type=float, default=0.5, help="gradient norm clip (0: none)")
parser.add_argument("--noise", type=float, default=0.1)
parser.add_argument("--log-every", type=int, default=25)
parser.add_argument("--tail", type=int, default=25,
                    help="the final loss is the mean over this many last steps")
parser.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / ranks)")
parser.add_argument("--seed", type=int, default=42)


class LM(nn.Module):
    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, embed)
        self.rnn = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)
        nn.init.uniform_(self.emb.weight, -0.1, 0.1)
        nn.init.uniform_(self.out.weight, -0.1, 0.1)
        nn.init.zeros_(self.out.bias)

    def forward(self, tokens):
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h)


class Text:
    """The hidden process: each token has 8 successors, Zipf-weighted, themselves drawn from a
    Zipf law over the vocabulary (frequent words are frequent); with probability noise the next
    token is a uniform draw instead."""

    def __init__(self, vocab, noise, seed):
        rng = np.random.RandomState(seed)
        self.vocab, self.noise = vocab, noise
        freq = 1.0 / np.arange(1, vocab + 1) ** 1.1
        order = rng.permutation(vocab)
        self.succ = order[np.searchsorted(np.cumsum(freq / freq.sum()), rng.rand(vocab, 8))
                          .clip(0, vocab - 1)]
        w = 1.0 / np.arange(1, 9) ** 1.2
        self.cdf = np.cumsum(w / w.sum())

    def sample(self, rng, n, length):
        out = np.empty((n, length + 1), dtype=np.int64)
        out[:, 0] = rng.randint(0, self.vocab, size=n)
        for t in range(1, length + 1):
            j = np.minimum(np.searchsorted(self.cdf, rng.rand(n)), 7)
            noisy = rng.rand(n) < self.noise
            out[:, t] = np.where(noisy, rng.randint(0, self.vocab, size=n),
                                 self.succ[out[:, t - 1], j])
        return torch.from_numpy(out)


def batch(text, args, step):
    """This rank's part of the step's global batch (the same in every configuration)."""
    rng = np.random.RandomState(args.seed * 100003 + step)
    data = text.sample(rng, args.batch_size * hvd.size(), args.seq_len)
    r, b = hvd.rank(), args.batch_size
    mine = data[r * b:(r + 1) * b]
    return mine[:, :-1], mine[:, 1:]


def topk_ratio(args, step):
    if step >= args.topk_warmup:
        return args.ratio
    start = max(args.ratio, 0.25)
    return start * (args.ratio / start) ** (step / args.topk_warmup)


def main():
    args = parser.parse_args()
    hvd.init()
    threads = args.threads or max(1, torch.get_num_threads() // max(1, hvd.local_size()))
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    model = LM(args.vocab, args.embed, args.hidden, args.layers)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    compression = (hvd.Compression.topk(args.ratio, min_numel=args.min_numel)
                   if args.compression == "topk" else hvd.Compression.none)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr), named_parameters=model.named_parameters(),
        compression=compression, sparse_algorithm=args.sparse_algorithm,
        quantize_bits=args.quantize_bits)
    text = Text(args.vocab, args.noise, args.seed)
    params = sum(p.numel() for p in model.parameters())
    if hvd.rank() == 0:
        print("compression %s%s%s: %d ranks, %d threads each, %.2f M parameters (%.1f MB of "
              "gradient), batch %d x %d per rank"
              % (args.compression, " ratio %g" % args.ratio if args.compression == "topk" else "",
                 " quantize %d bits" % args.quantize_bits if args.quantize_bits else "",
                 hvd.size(), threads, params / 1e6, params * 4 / 1e6, args.batch_size,
                 args.seq_len), flush=True)
    losses, times, waits = [], [], []
    for step in range(args.steps):
        x, y = batch(text, args, step)
        if args.compression == "topk":
            compression.ratio = topk_ratio(args, step)
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, args.vocab), y.reshape(-1))
        loss.backward()  # the hooks select (top-k) and start the allreduces meanwhile
        t1 = time.perf_counter()
        optimizer.synchronize()
        waits.append(time.perf_counter() - t1)
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        with optimizer.skip_synchronize():
            optimizer.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            window = losses[-args.log_every:]
            mean = hvd.allreduce(torch.tensor(sum(window) / len(window), dtype=torch.float64),
                                 name="lm.loss").item()
            if hvd.rank() == 0:
                print("step %d: loss %.4f, %.1f ms/step (%.1f waiting for the allreduces)" % (
                    step + 1, mean, 1000 * sum(times[-len(window):]) / len(window),
                    1000 * sum(waits[-len(window):]) / len(window)), flush=True)
    tail = losses[-args.tail:]
    final = hvd.allreduce(torch.tensor(sum(tail) / len(tail), dtype=torch.float64),
                          name="lm.final").item()
    steady = times[min(5, len(times) - 1):]
    step_ms = 1000 * hvd.allreduce(torch.tensor(sum(steady) / len(steady), dtype=torch.float64),
                                   name="lm.time", op=hvd.Max).item()
    if hvd.rank() == 0:
        print("final: loss %.4f (ln vocab %.3f), %.1f ms/step (mean after step 5, slowest rank)"
              % (final, math.log(args.vocab), step_ms), flush=True)


if __name__ == "__main__":
    main()
