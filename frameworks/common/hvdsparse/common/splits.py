"""Alltoall's splits, checked in every binding before anything is enqueued."""


def check_splits(splits, dim0, ranks, error=ValueError):
    """splits as a list of ints: how many rows of the first dimension go to each rank of the
    set. None asks for equal parts, so dim0 must divide by the number of ranks. dim0 None: not
    known yet (a graph being traced). error: the binding's class for bad arguments."""
    if splits is None:
        if dim0 is not None and dim0 % ranks != 0:
            raise error("tensor(s) first dimension %d is not divisible by the number of ranks "
                        "%d: pass splits" % (dim0, ranks))
        return None
    splits = [int(s) for s in splits]
    if len(splits) != ranks:
        raise error("splits has %d entries but the process set has %d ranks"
                    % (len(splits), ranks))
    if any(s < 0 for s in splits):
        raise error("splits must be non-negative: %s" % splits)
    if dim0 is not None and sum(splits) != dim0:
        raise error("Sum of splits entries %d does not match the first dimension %d of the "
                    "tensor" % (sum(splits), dim0))
    return splits
