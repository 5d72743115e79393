"""DeAR (Zhang et al., ICDCS 2023): all-reduce decoupled into a reduce-scatter overlapped with
backward and an all-gather overlapped with the next forward. Selected by
hvd.DistributedOptimizer(..., pipeline="dear", model=model); see docs/dear.md.

    planner.py    buckets: observed forward order, whole layers, bytes threshold, one dtype,
                  padded to the size
    bucket.py     one bucket's flat buffer and its reduce-scatter / all-gather handles
    hooks.py      forward pre-hooks, post-accumulate-grad hooks, state_dict pre-hook
    optimizer.py  step(), flush(), synchronize(): the schedule around the user's optimizer
    tuner.py      Gaussian-process / expected-improvement search of the bucket size
"""
from hvdsparse.torch.dear.optimizer import make  # noqa: F401
from hvdsparse.torch.dear.tuner import BucketSizeTuner, GaussianProcessEI, minimize  # noqa: F401
