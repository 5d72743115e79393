"""The row that opens every part of the first alltoall in the GPU route's sparse allreduces made
of routed collectives (split.py, recursive_doubling.py): the dense size as an index, the
algorithm's code with the quantizer's width above it, and 1 when the sender had an index outside
[0, n). Every rank sends it to every rank and checks every rank's, so ranks that disagree fail
together, naming the rank, instead of mixing partitions."""
import torch

from hvdsparse.torch.chained import AgreedFailure

CODES = {"ssar_split_allgather": 1, "dsar_split_allgather": 2, "zen": 3,
         "ssar_recursive_doubling": 4}
_NAMES = {code: name for name, code in CODES.items()}


def header(n, algorithm, bits, bad, idx_dtype, width):
    """The header row (width bytes) for this rank's call."""
    row = torch.zeros(width, dtype=torch.uint8)
    ib = torch.empty(0, dtype=idx_dtype).element_size()
    row[:ib] = torch.tensor([n], dtype=idx_dtype).view(torch.uint8)
    row[ib] = CODES[algorithm] | bits << 4
    row[ib + 1] = 1 if bad else 0
    return row


def check_headers(recv, splits, mine, name, ib):
    """Raises AgreedFailure (a ValueError) on every rank when a rank's header differs from mine
    or says it sent an index outside the tensor (every rank received every rank's header, each part's first row);
    returns where each rank's part starts in recv."""
    starts = [sum(splits[:r]) for r in range(len(splits))]
    heads = recv[starts].cpu()
    me = mine.cpu()
    for r, head in enumerate(heads):
        if head[ib + 1]:
            raise AgreedFailure("hvdsparse: sparse allreduce '%s': rank %d sent an index outside "
                             "the tensor's %d elements" % (name, r, _n_of(me, ib)))
    for r, head in enumerate(heads):
        if not torch.equal(head[:ib + 1], me[:ib + 1]):
            raise AgreedFailure(
                "hvdsparse: sparse allreduce '%s': rank %d ran %s over %d elements, this rank %s "
                "over %d; every rank must ask for the same algorithm on tensors of the same size"
                % (name, r, _algorithm_of(head, ib), _n_of(head, ib), _algorithm_of(me, ib),
                   _n_of(me, ib)))
    return starts


def _n_of(head, ib):
    return int(head[:ib].view(torch.int32 if ib == 4 else torch.int64)[0])


def _algorithm_of(head, ib):
    code, bits = int(head[ib]) & 15, int(head[ib]) >> 4
    return _NAMES.get(code, "an unknown algorithm") + (
        " with %d-bit values" % bits if bits else "")
