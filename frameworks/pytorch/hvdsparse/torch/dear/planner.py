"""Bucket planner: parameters in observed forward order -> fixed buckets.

Pure functions of (ordered parameters, threshold, world size), so every rank that is given the
same order plans the same buckets. The order itself comes from rank 0 (see optimizer.py)."""
import torch


class Slot:
    """Where one parameter's gradient lives inside its bucket's flat buffer."""
    __slots__ = ("param", "name", "bucket", "offset", "numel")

    def __init__(self, param, name, bucket, offset):
        self.param = param
        self.name = name
        self.bucket = bucket
        self.offset = offset
        self.numel = param.numel()


class BucketPlan:
    """One bucket: consecutive parameters (forward order) of one dtype and device.

    numel is the sum of the parameters' sizes; padded rounds it up to a multiple of the world
    size (pad 0 when already divisible) so that every rank's reduce-scatter shard has the same
    length."""
    __slots__ = ("index", "dtype", "device", "slots", "numel", "padded")

    def __init__(self, index, dtype, device):
        self.index = index
        self.dtype = dtype
        self.device = device
        self.slots = []
        self.numel = 0
        self.padded = 0

    def nbytes(self):
        return self.numel * _itemsize(self.dtype)

    def signature(self):
        """What must agree across ranks: dtype, padded length and the parameter names."""
        return (str(self.dtype), self.padded, tuple(s.name for s in self.slots))


def _itemsize(dtype):
    return torch.empty((), dtype=dtype).element_size()


def plan_buckets(named_params, threshold_bytes, world_size, first_bucket_bytes=None):
    """Groups (name, param) pairs, given in forward order, into BucketPlans.

    The unit is a layer: consecutive parameters of one module (one name prefix) and one kind
    (dtype, device), kept together because backward produces them together (a linear layer's
    weight and bias come out of one node). Only a module holding many large tensors (a
    ParameterList, the top module's own parameters) is cut, before a parameter of a quarter of
    the threshold or more that would take its run past the threshold.

    A layer joins the open bucket of its kind while the bucket stays within threshold_bytes
    (first_bucket_bytes for bucket 0, when given); one that would overflow it starts a new
    bucket, unless the open one holds less than a quarter of the threshold (a norm layer's few
    bytes then ride with the next layer instead of making a bucket of their own). Bucket 0
    closes as soon as it reaches first_bucket_bytes.

    Buckets are numbered by their first parameter's position, so bucket 0 holds the first
    parameters the forward pass needs. Returns the list of BucketPlans, numbered 0..G-1."""
    if threshold_bytes <= 0:
        raise ValueError("bucket threshold must be positive, got %r" % (threshold_bytes,))
    if world_size <= 0:
        raise ValueError("world size must be positive, got %r" % (world_size,))
    buckets, open_by_kind = [], {}
    for kind, layer, nbytes in _layers(named_params, threshold_bytes):
        b = open_by_kind.get(kind)
        limit = first_bucket_bytes if (first_bucket_bytes and b is not None and b.index == 0) \
            else threshold_bytes
        if b is None or (b.nbytes() + nbytes > limit and 4 * b.nbytes() >= limit):
            b = BucketPlan(len(buckets), kind[0], kind[1])
            buckets.append(b)
            open_by_kind[kind] = b
        for name, p in layer:
            b.slots.append(Slot(p, name, b.index, b.numel))
            b.numel += p.numel()
        # The first bucket closes as soon as it reaches its own (smaller) size.
        if first_bucket_bytes and b.index == 0 and b.nbytes() >= first_bucket_bytes:
            open_by_kind.pop(kind)
    for b in buckets:
        b.padded = -(-b.numel // world_size) * world_size if b.numel else world_size
    return buckets


def _layers(named_params, threshold_bytes):
    """[(kind, [(name, param)], bytes)]: runs of consecutive parameters with one name prefix
    (their module) and one (dtype, device); a run ends before a large parameter (a quarter of
    the threshold or more) that would take it past the threshold."""
    out = []
    for name, p in named_params:
        kind = (p.dtype, p.device)
        key = (kind, name.rpartition(".")[0])
        nbytes = p.numel() * p.element_size()
        if out and out[-1][3] == key and not (4 * nbytes >= threshold_bytes and
                                              out[-1][2] + nbytes > threshold_bytes):
            out[-1][1].append((name, p))
        else:
            out.append([kind, [(name, p)], 0, key])
        out[-1][2] += nbytes
    return [(kind, layer, nbytes) for kind, layer, nbytes, _ in out]


def forward_plan(model, traced, wanted):
    """(names in forward order, {id(param): applier module}) for the wanted parameters.

    traced: modules in the order of their first forward call (may be empty). A parameter's
    applier is the module whose forward pre-hook applies its update: its owner when the owner's
    forward ran in the trace, else the nearest traced ancestor (nn.MultiheadAttention reads
    out_proj.weight without calling out_proj), else, when nothing around it ran, the owner.
    A parameter owned by several modules (tied weights) goes with the applier that ran first.
    Parameters are ordered by their applier's position in the trace, untraced ones last, each
    group in registration order. wanted: {id(param): name}."""
    pos = {id(m): i for i, m in enumerate(traced)}
    untraced = len(traced)
    found = []                              # (param, applier or None, owner), DFS order
    stack = [(model, None)]
    while stack:
        m, app = stack.pop()
        here = m if id(m) in pos else app
        for p in m.parameters(recurse=False):
            if id(p) in wanted:
                found.append((p, here, m))
        stack.extend((c, here) for c in reversed(list(m.children())))
    best = {}
    for i, (p, app, owner) in enumerate(found):
        key = (pos[id(app)] if app is not None else untraced, i)
        if id(p) not in best or key < best[id(p)][0]:
            best[id(p)] = (key, app if app is not None else owner, p)
    ranked = sorted(best.values(), key=lambda t: t[0])
    return [wanted[id(p)] for _, _, p in ranked], {id(p): app for _, app, p in ranked}

