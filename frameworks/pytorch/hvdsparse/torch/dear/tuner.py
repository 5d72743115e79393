"""Bayesian optimisation of the bucket size (DeAR section 3), and the step schedule around it.

GaussianProcessEI is a 1-D minimiser: a Gaussian process with a Matern 5/2 kernel (length scale
and noise picked by marginal likelihood from a small grid) and the expected-improvement
acquisition, maximised on a dense grid. It is written with torch (float64), so it needs nothing
else, and it is a pure object: no ranks, no clocks.

BucketSizeTuner drives it over x = log2(threshold in MB) in [0, 8], i.e. [1, 256] MB: after a
warm-up, each trial runs steps_per_trial steps at one threshold, throws the first `skip`
intervals away (they contain the rebuild) and scores the mean of the rest (wall clock per
step). Only rank 0 runs the GP; the optimizer broadcasts its answer, so every rank uses the
same threshold and no GP is fed points it did not choose. After `trials` trials the best
*observed* threshold is kept, as in the paper."""
import math

import torch

MB = 1 << 20


def _matern52(a, b, length):
    d = (a[:, None] - b[None, :]).abs() / length
    s = math.sqrt(5.0) * d
    return (1.0 + s + s * s / 3.0) * torch.exp(-s)


class GaussianProcessEI:
    """Minimises a noisy 1-D function on [lo, hi] by GP regression + expected improvement."""

    LENGTHS = (0.05, 0.1, 0.2, 0.35, 0.6, 1.0)   # in units of (hi - lo)
    NOISES = (1e-6, 1e-3, 1e-2, 1e-1)            # variance, in units of var(y)

    def __init__(self, lo, hi, xi=0.01, grid=513):
        if not hi > lo:
            raise ValueError("need lo < hi, got [%r, %r]" % (lo, hi))
        self.lo, self.hi, self.xi = float(lo), float(hi), float(xi)
        self.grid = torch.linspace(0.0, 1.0, grid, dtype=torch.float64)
        self.xs, self.ys = [], []

    def observe(self, x, y):
        """Records y = f(x)."""
        self.xs.append(float(x))
        self.ys.append(float(y))

    def best(self):
        """(x, y) of the smallest observation, or None before any."""
        if not self.ys:
            return None
        i = min(range(len(self.ys)), key=self.ys.__getitem__)
        return self.xs[i], self.ys[i]

    def _unit(self, x):
        return (torch.tensor(x, dtype=torch.float64) - self.lo) / (self.hi - self.lo)

    def _fit(self, u, y):
        """Cholesky factor, weights and log marginal likelihood for the best (length, noise)."""
        best = None
        n = len(u)
        for length in self.LENGTHS:
            k = _matern52(u, u, length)
            for noise in self.NOISES:
                try:
                    chol = torch.linalg.cholesky(k + noise * torch.eye(n, dtype=torch.float64))
                except RuntimeError:
                    continue
                alpha = torch.cholesky_solve(y[:, None], chol)[:, 0]
                lml = -0.5 * float(y @ alpha) - float(torch.log(torch.diagonal(chol)).sum())
                if best is None or lml > best[0]:
                    best = (lml, length, chol, alpha)
        return best

    def posterior(self, u_query):
        """Mean and standard deviation (standardised y units) at unit-interval points."""
        u = self._unit(self.xs)
        y = torch.tensor(self.ys, dtype=torch.float64)
        mean, std = y.mean(), y.std() if len(self.ys) > 1 else torch.tensor(1.0)
        std = std if float(std) > 0 else torch.tensor(1.0)
        yn = (y - mean) / std
        _, length, chol, alpha = self._fit(u, yn)
        ks = _matern52(u_query, u, length)
        mu = ks @ alpha
        v = torch.cholesky_solve(ks.t(), chol)
        var = (1.0 - (ks * v.t()).sum(1)).clamp_min(1e-12)
        return mu, var.sqrt(), yn

    def suggest(self):
        """Next x to try: the grid point of largest expected improvement (middle if empty)."""
        if not self.xs:
            return 0.5 * (self.lo + self.hi)
        mu, sigma, yn = self.posterior(self.grid)
        imp = yn.min() - mu - self.xi
        z = imp / sigma
        normal = torch.distributions.Normal(0.0, 1.0)
        ei = imp * normal.cdf(z) + sigma * torch.exp(normal.log_prob(z))
        # Never propose a point already measured (its EI is ~0 anyway unless noise is large).
        seen = self._unit(self.xs)
        near = (self.grid[:, None] - seen[None, :]).abs().min(1).values < 0.5 / len(self.grid)
        ei[near] = -1.0
        i = int(torch.argmax(ei))
        return self.lo + float(self.grid[i]) * (self.hi - self.lo)


def minimize(f, lo, hi, trials, start=None):
    """Runs GaussianProcessEI on f for `trials` evaluations; returns (best x, best y, xs)."""
    gp = GaussianProcessEI(lo, hi)
    x = start if start is not None else gp.suggest()
    for _ in range(trials):
        gp.observe(x, f(x))
        x = gp.suggest()
    bx, by = gp.best()
    return bx, by, list(gp.xs)


class BucketSizeTuner:
    """Step schedule for tuning the bucket threshold; see the module docstring.

    Every rank calls on_step(now) once per optimizer step, with the same step count, and gets
    True on the steps where a decision is due (the same steps on every rank). Only rank 0 then
    calls decide(), whose value (threshold in bytes) the caller broadcasts; apply() records it
    on every rank."""

    LO, HI = 0.0, 8.0   # log2(MB): 1 MB .. 256 MB

    def __init__(self, start_bytes, trials=10, steps_per_trial=5, skip=2, warmup=5):
        if trials < 1 or steps_per_trial < skip + 1:
            raise ValueError("tuner needs trials >= 1 and steps_per_trial > skip")
        self.trials, self.per_trial, self.skip, self.warmup = trials, steps_per_trial, skip, warmup
        self.gp = GaussianProcessEI(self.LO, self.HI, xi=0.01)
        start_mb = min(max(start_bytes / MB, 1.0), 256.0)
        self.x = math.log2(start_mb)    # threshold of the running trial
        self.trial = -1                 # -1: warm-up; trials: finished
        self.steps = 0
        self.times = []
        self.last = None
        self.history = []               # (threshold bytes, mean seconds per step), rank 0 only

    @staticmethod
    def to_bytes(x):
        return int(round((2.0 ** x) * MB))

    @property
    def done(self):
        return self.trial >= self.trials

    def on_step(self, now):
        """Records the step that ended at `now`; True when a decision is due."""
        if self.done:
            return False
        if self.last is not None:
            self.times.append(now - self.last)
        self.last = now
        self.steps += 1
        due = self.warmup if self.trial < 0 else self.per_trial
        return self.steps >= due

    def decide(self):
        """Rank 0: scores the finished trial and returns the next threshold in bytes."""
        if self.trial >= 0:
            measured = self.times[self.skip:] or self.times
            y = sum(measured) / len(measured)
            self.gp.observe(self.x, y)
            self.history.append((self.to_bytes(self.x), y))
        if self.trial + 1 >= self.trials:
            return self.to_bytes(self.gp.best()[0])
        if self.trial < 0:
            return self.to_bytes(self.x)   # first trial: the configured threshold
        return self.to_bytes(self.gp.suggest())

    def apply(self, threshold_bytes, now):
        """Every rank: the next trial (or the final choice) uses threshold_bytes."""
        self.x = math.log2(max(threshold_bytes, 1) / MB)
        self.trial += 1
        self.steps = 0
        self.times = []
        self.last = now
