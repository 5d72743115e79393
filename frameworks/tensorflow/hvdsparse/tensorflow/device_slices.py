"""tf.IndexedSlices on GPUs on the NCCL route: every rank's rows gathered where they are (one
in-place allgather of (index, values) rows as bytes, dlpack_views) instead of the runtime's
sparse path on host memory.

The result is Horovod's for IndexedSlices: every rank's rows in rank order, duplicates not
summed (an optimizer's scatter-add sums them), values scaled by prescale, 1/size for Average
and postscale, so every rank holds the same bits. An index outside the dense shape fails every
rank (they all see the same gathered indices). The allgather carries the sparse
allreduce's own name, so a rank that took the runtime's path for the same name fails
negotiation instead of waiting."""
import tensorflow as tf

from hvdsparse.common import basics
from hvdsparse.common.ops import Average
from hvdsparse.common.sparse import requested_algorithm
from hvdsparse.tensorflow import dlpack_views


def runs_here(values, algorithm, quant_bits):
    """True for floating-point GPU values dlpack_views takes, on the NCCL route, asking for
    auto or allgather (common.sparse.requested_algorithm) without quantization."""
    return (requested_algorithm(algorithm) in ("auto", "allgather") and not quant_bits
            and dlpack_views.takes(values) and values.dtype.is_floating
            and basics.gpu_operations_routed())


def start(values, indices, full_name, ps_id, start_allgather):
    """The allgather of one tf.IndexedSlices: its rows as bytes, each its index (int64) then its
    values, one operation on the values' GPU; start_allgather(tensor, name, ps_id) -> it."""
    with tf.device(values.device):
        n = tf.shape(values)[0]
        wide = tf.reshape(tf.bitcast(tf.cast(indices, tf.int64), tf.uint8), [n, 8])
        row = tf.reshape(tf.bitcast(values, tf.uint8), [n, -1])
        return start_allgather(tf.concat([wide, row], 1), full_name, ps_id)


def finish(gathered, like, rows, index_dtype, name, op, prescale, postscale, size,
           invalid_error):
    """(values, indices) of every rank's rows from the gathered bytes (like: this rank's values,
    for their dtype and row shape): checked against rows, scaled, indices in index_dtype."""
    n = tf.shape(gathered)[0]
    indices = tf.bitcast(tf.reshape(gathered[:, :8], [n, 8]), tf.int64)
    row_shape = tf.shape(like)[1:]
    values = tf.bitcast(tf.reshape(gathered[:, 8:], tf.concat(
        [[n], row_shape, [like.dtype.size]], 0)), like.dtype)
    if bool(tf.reduce_any((indices < 0) | (indices >= rows)).numpy()):
        raise invalid_error("sparse allreduce '%s': a rank sent an index outside the tensor's "
                            "%d rows" % (name, rows))
    factor = prescale * postscale / (size if op == Average else 1)
    if factor != 1.0:
        values = values * tf.cast(factor, values.dtype)
    return values, tf.cast(indices, index_dtype)
