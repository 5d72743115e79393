"""The sparse allreduce of tf.IndexedSlices with dense shapes, several enqueued together: what
mpi_ops' allreduce, the gradient tapes and Compression.topk run (on the NCCL route, float slices
are gathered on the GPU: device_slices)."""
import tensorflow as tf

from hvdsparse.common import _lib
from hvdsparse.common.basics import require_init
from hvdsparse.common.process_sets import set_id
from hvdsparse.tensorflow import device_slices
from hvdsparse.tensorflow.runtime_calls import (
    HorovodInvalidArgumentError, _check_dtype, _complete, _host, _name, _run, _start_allgather,
    _start_sparse_allreduce)


def sparse_allreduce_many(slices, names, op, prescale, postscale, process_set, algorithm=None,
                          quant_bits=0):
    """Sparse allreduces of a list of tf.IndexedSlices with dense shapes, enqueued together and
    waited for together (one py_function in a graph). Returns tf.IndexedSlices with sorted
    unique indices of each input's dtype (every row when the result came out dense).
    quant_bits: the sparse allreduce's quantization width (docs/compression.md)."""
    require_init()
    if algorithm is not None:
        _lib.check_sparse_algorithm(algorithm)
    ps_id = set_id(process_set)
    fulls = [_name("sparse_allreduce", n, ps_id) for n in names]
    inputs, tout = [], []
    for s in slices:
        v = tf.convert_to_tensor(s.values)
        _check_dtype(v.dtype)
        inputs += [v, s.indices, tf.cast(s.dense_shape, tf.int64)]
        tout += [v.dtype, s.indices.dtype]

    size = process_set.size()

    def body(arrays):
        ops, gathered = [], []  # gathered[k]: slice k's rows are gathered on its GPU
        for k, full in enumerate(fulls):
            vals, idx, shape = arrays[3 * k:3 * k + 3]
            gathered.append(device_slices.runs_here(vals, algorithm, quant_bits))
            if gathered[-1]:
                ops.append(device_slices.start(vals, idx, full, ps_id, _start_allgather))
            else:
                ops.append(_start_sparse_allreduce(vals, idx, shape, full, ps_id, op, algorithm,
                                                   prescale, postscale, quant_bits))
        results, out = iter(_complete(ops)), []
        for k, on_gpu in enumerate(gathered):
            if on_gpu:
                rows = int(_host(arrays[3 * k + 2]).reshape(-1)[0])
                out += device_slices.finish(next(results), arrays[3 * k], rows,
                                            arrays[3 * k + 1].dtype, fulls[k], op, prescale,
                                            postscale, size, HorovodInvalidArgumentError)
            else:
                vals, idx, _alg = next(results)
                out += [vals, idx]
        return out
    outs = _run(body, inputs, tout, in_place=True)
    result = []
    for k, s in enumerate(slices):
        vals, idx = outs[2 * k], outs[2 * k + 1]
        if s.values.shape.rank is not None:
            vals.set_shape([None] + s.values.shape.as_list()[1:])
        idx.set_shape([None])
        result.append(tf.IndexedSlices(vals, idx, dense_shape=s.dense_shape))
    return result
