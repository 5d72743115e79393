"""DistributedGradientTape and PartialDistributedGradientTape, and the gradient-allreduce
helper shared with the Keras DistributedOptimizer."""
import os

import tensorflow as tf

from hvdsparse.common import _lib
from hvdsparse.common.basics import require_init
from hvdsparse.common.ops import check_sparse_op, predivide_scales
from hvdsparse.common.process_sets import set_id
from hvdsparse.common.topk import check_quantize_bits, is_topk
from hvdsparse.tensorflow import mpi_ops, topk
from hvdsparse.tensorflow.compression import Compression
from hvdsparse.tensorflow.mpi_ops import Average, Sum, global_process_set
from hvdsparse.tensorflow.sparse_calls import sparse_allreduce_many


def _check_options(op, gradient_predivide_factor, num_groups, groups, sparse_algorithm=None,
                   quantize_bits=0):
    mpi_ops.check_op(op)
    check_quantize_bits(quantize_bits)
    if sparse_algorithm is not None:
        _lib.check_sparse_algorithm(sparse_algorithm)
    predivide_scales(op, gradient_predivide_factor)  # raises for a factor with op != Average
    if num_groups != 0 and groups is not None:
        raise ValueError("Only one of num_groups and groups can be set")
    if groups is not None:
        if not (isinstance(groups, list) or groups > 0):
            raise ValueError("groups should be a non-negative integer or a list of lists")
        if isinstance(groups, list) and not all(isinstance(g, list) for g in groups):
            raise ValueError("groups must be a list of lists of variables")
    if num_groups < 0:
        raise ValueError("num_groups should be a non-negative integer")


def _group_indices(n, num_groups, groups, sources):
    """Lists of gradient indices reduced together (a grouped allreduce each); indices not in any
    list are reduced one by one."""
    if isinstance(groups, int):
        num_groups, groups = groups, None
    if groups is not None:
        ids = {}
        for gi, g in enumerate(groups):
            for v in g:
                ids[id(v)] = gi
        out = [[] for _ in groups]
        for i, s in enumerate(sources):
            if id(s) in ids:
                out[ids[id(s)]].append(i)
        return [g for g in out if g]
    if num_groups > 0:
        k = min(num_groups, n)
        base, extra = divmod(n, k)
        out, start = [], 0
        for j in range(k):
            m = base + (1 if j < extra else 0)
            out.append(list(range(start, start + m)))
            start += m
        return [g for g in out if g]
    return []


def allreduce_gradients(grads, sources=None, compression=Compression.none,
                        sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0,
                        num_groups=0, groups=None, process_set=global_process_set,
                        sparse_algorithm=None, sparse_detect=None, quantize_bits=0):
    """Allreduces a list of gradients (None entries stay None). Dense gradients of one call are
    enqueued together and waited for together (one py_function inside tf.function), and so
    are the tf.IndexedSlices, which go through the sparse allreduce (sparse_algorithm forces
    its algorithm) unless sparse_as_dense. sparse_detect=True: dense gradients take the sparse
    path when mostly zero rows make it cheaper (same result); False never; None
    HVDSPARSE_SPARSE_DETECT's default. Not differentiable. compression=Compression.topk(...):
    dense gradients go through top-k with error feedback and the sparse allreduce (topk.py), whose
    gather after the full-precision reduce quantize_bits=2/4/8 quantizes (docs/compression.md)."""
    grads = list(grads)
    if is_topk(compression):
        return topk.allreduce_gradients(compression, grads, sources, allreduce_gradients, op,
                                        gradient_predivide_factor, process_set, sparse_algorithm,
                                        quantize_bits, sparse_as_dense=sparse_as_dense,
                                        num_groups=num_groups, groups=groups,
                                        sparse_detect=sparse_detect)
    # At size 1 there is nothing to reduce; in an elastic job the size can grow after a step was
    # traced, so the reduction stays in the graph (the runtime passes it through at size 1).
    elastic = os.environ.get("HVDSPARSE_ELASTIC") == "1" or os.environ.get("HOROVOD_ELASTIC") == "1"
    set_id(process_set)  # ValueError for a set that is not registered
    alone = process_set.size() == 1 and op in (Average, Sum) and \
        gradient_predivide_factor == 1.0 and not elastic
    if alone or not process_set.included():  # as Horovod, a rank outside the set keeps its own
        return [tf.convert_to_tensor(g) if (sparse_as_dense and isinstance(g, tf.IndexedSlices))
                else g for g in grads]
    compression = compression or Compression.none
    prescale, postscale = predivide_scales(op, gradient_predivide_factor)
    out = [None] * len(grads)
    dense, sparse = [], []
    for i, g in enumerate(grads):
        if g is None:
            continue
        if isinstance(g, tf.IndexedSlices):
            if sparse_as_dense:
                grads[i] = tf.convert_to_tensor(g)
            elif g.dense_shape is None:
                out[i] = mpi_ops.allreduce(g, op=op, process_set=process_set)
                continue
            else:
                sparse.append(i)
                continue
        dense.append(i)
    if sparse:
        check_sparse_op(op)
        reduced = sparse_allreduce_many([grads[i] for i in sparse], [None] * len(sparse), op,
                                        1.0, 1.0, process_set, sparse_algorithm)
        for i, r in zip(sparse, reduced):
            out[i] = r
    if not dense:
        return out
    comp = [compression.compress(mpi_ops._prepare(grads[i])) for i in dense]
    tensors = [c[0] for c in comp]
    pos = {i: k for k, i in enumerate(dense)}
    grouped = _group_indices(len(grads), num_groups, groups, sources or [])
    grouped = [[pos[i] for i in g if i in pos] for g in grouped]
    grouped = [g for g in grouped if g]
    in_group = {k for g in grouped for k in g}
    units = grouped + [[k] for k in range(len(tensors)) if k not in in_group]
    reduced = _reduce_units(tensors, units, op, prescale, postscale, process_set,
                            sparse_detect, sparse_algorithm if sparse_detect else None)
    for k, i in enumerate(dense):
        out[i] = compression.decompress(reduced[k], comp[k][1])
    return out


def _reduce_units(tensors, units, op, prescale, postscale, process_set, sparse_detect=None,
                  sparse_algorithm=None):
    require_init()
    ps_id = set_id(process_set)
    names = [mpi_ops._name("grouped_allreduce" if len(u) > 1 else "allreduce", None, ps_id)
             for u in units]

    def body(arrays):
        ops = [mpi_ops._start_allreduce([arrays[k] for k in u], name, ps_id, op, prescale,
                                        postscale, sparse_detect, sparse_algorithm)
               for u, name in zip(units, names)]
        results = mpi_ops._complete(ops)
        flat = [None] * len(arrays)
        for u, res in zip(units, results):
            for k, r in zip(u, res):
                flat[k] = r
        return flat
    outs = mpi_ops._run(body, tensors, [t.dtype for t in tensors], in_place=True)
    for o, t in zip(outs, tensors):
        o.set_shape(t.shape)
    return outs


class DistributedGradientTape:
    """Wraps a tf.GradientTape: gradient() returns gradients allreduced over process_set.
    tf.IndexedSlices gradients (tf.gather, Keras Embedding) go through the sparse allreduce and
    stay tf.IndexedSlices unless sparse_as_dense; sparse_algorithm, sparse_detect and
    quantize_bits (with Compression.topk) as in allreduce_gradients.

        with tf.GradientTape() as tape:
            loss = ...
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    Every other attribute is the wrapped tape's. It can also be entered as a context manager
    (with hvd.DistributedGradientTape(tf.GradientTape()) as tape)."""

    def __init__(self, gradtape, device_dense='', device_sparse='', compression=Compression.none,
                 sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0,
                 num_groups=0, groups=None, process_set=global_process_set,
                 scale_local_gradients=True, sparse_algorithm=None, sparse_detect=None,
                 quantize_bits=0):
        _check_options(op, gradient_predivide_factor, num_groups, groups, sparse_algorithm,
                       quantize_bits)
        self._tape = gradtape
        self._compression = compression or Compression.none
        self._sparse_as_dense = sparse_as_dense
        self._op = op
        self._predivide = gradient_predivide_factor
        self._num_groups = num_groups
        self._groups = groups
        self._process_set = process_set
        self._sparse_algorithm = sparse_algorithm
        self._sparse_detect = sparse_detect
        self._quantize_bits = quantize_bits
        self._scale_local_gradients = scale_local_gradients
        self._local_sources = set()

    def __getattr__(self, item):
        return getattr(self.__dict__["_tape"], item)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *args):
        return self._tape.__exit__(*args)

    def register_local_source(self, source):
        """Marks a variable as local: its gradient is not allreduced."""
        self._local_sources.add(source.ref() if hasattr(source, "ref") else id(source))

    def _is_local(self, source):
        key = source.ref() if hasattr(source, "ref") else id(source)
        return key in self._local_sources

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = self._tape.gradient(target, sources, output_gradients,
                                    unconnected_gradients=unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads, expand_composites=False)
        out = allreduce_skipping_local(
            flat_grads, flat_sources, [self._is_local(s) for s in flat_sources],
            self._scale_local_gradients and self._op == Average,
            compression=self._compression, sparse_as_dense=self._sparse_as_dense, op=self._op,
            gradient_predivide_factor=self._predivide, num_groups=self._num_groups,
            groups=self._groups, process_set=self._process_set,
            sparse_algorithm=self._sparse_algorithm, sparse_detect=self._sparse_detect,
            quantize_bits=self._quantize_bits)
        return tf.nest.pack_sequence_as(grads, out)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None):
        """gradient(), split as Horovod's: ([(local source, gradient)], [(other source,
        gradient)]), each in the order of sources."""
        sources = tf.nest.flatten(sources)
        pairs = list(zip(sources, self.gradient(target, sources, output_gradients)))
        return ([p for p in pairs if self._is_local(p[0])],
                [p for p in pairs if not self._is_local(p[0])])


def allreduce_skipping_local(grads, sources, local, scale_local, **options):
    """allreduce_gradients over the gradients whose local flag is False; the local ones are
    kept, divided by the process set's size when scale_local (Horovod's
    scale_local_gradients)."""
    shared = [i for i, is_local in enumerate(local) if not is_local]
    reduced = allreduce_gradients([grads[i] for i in shared], [sources[i] for i in shared],
                                  **options)
    out = list(grads)
    for i, r in zip(shared, reduced):
        out[i] = r
    n = options.get("process_set", global_process_set).size()
    if scale_local and n > 1:
        for i, is_local in enumerate(local):
            if is_local and out[i] is not None:
                out[i] = _scale(out[i], 1.0 / n)
    return out


def _scale(g, factor):
    if isinstance(g, tf.IndexedSlices):
        return tf.IndexedSlices(g.values * tf.cast(factor, g.values.dtype), g.indices,
                                g.dense_shape)
    return g * tf.cast(factor, g.dtype)


def PartialDistributedGradientTape(gradtape, device_dense='', device_sparse='',
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set, local_layers=None,
                                   scale_local_gradients=True, sparse_algorithm=None,
                                   sparse_detect=None, quantize_bits=0):
    """A DistributedGradientTape whose local_layers' (a Keras layer or a list of them)
    variables are not allreduced; with scale_local_gradients and op Average their gradients are
    divided by the set size."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients, sparse_algorithm,
                                   sparse_detect, quantize_bits)
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        for v in layer.trainable_weights:
            tape.register_local_source(v)
    return tape
