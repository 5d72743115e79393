"""Gradients of the collectives, eagerly and inside tf.function."""
import numpy as np
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from conftest import execute


def _grad(fn, x, dy):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    return tape.gradient(y, x, output_gradients=dy)


def test_allreduce_grad(mode):
    r, n = hvd.rank(), hvd.size()
    x = tf.ones([3, 2])
    for op, factor in ((hvd.Sum, n), (hvd.Average, 1.0)):
        g = execute(mode, lambda t: _grad(lambda a: hvd.allreduce(a, op=op), t,
                                          tf.ones([3, 2]) * (r + 1)), x)
        expected = sum(q + 1 for q in range(n)) * (1.0 if op == hvd.Sum else 1.0 / n)
        np.testing.assert_allclose(g.numpy(), np.full([3, 2], expected), rtol=1e-6)
        assert factor  # documented: Sum -> sum of the gradients, Average -> their mean


def test_grouped_allreduce_grad(mode):
    n = hvd.size()

    def f(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            ys = hvd.grouped_allreduce([a, b], op=hvd.Sum)
            loss = tf.reduce_sum(ys[0]) + 2 * tf.reduce_sum(ys[1])
        return tape.gradient(loss, [a, b])
    ga, gb = execute(mode, f, tf.ones([2]), tf.ones([3]))
    np.testing.assert_allclose(ga.numpy(), [n, n])
    np.testing.assert_allclose(gb.numpy(), [2 * n] * 3)


def test_allgather_grad(mode):
    r, n = hvd.rank(), hvd.size()
    x = tf.ones([r + 1, 2])
    total = sum(q + 1 for q in range(n))
    # every rank weights row j of the gathered tensor by j
    dy = tf.tile(tf.reshape(tf.range(total, dtype=tf.float32), [total, 1]), [1, 2])
    g = execute(mode, lambda t: _grad(lambda a: hvd.allgather(a), t, dy), x)
    offset = sum(q + 1 for q in range(r))
    expected = np.tile(np.arange(offset, offset + r + 1, dtype=np.float32)[:, None], [1, 2])
    np.testing.assert_allclose(g.numpy(), expected)  # Average of identical gradients


def test_broadcast_grad(mode):
    """The ranks' gradients averaged on the root, zero elsewhere (Horovod's _broadcast_grad)."""
    r, n = hvd.rank(), hvd.size()
    x = tf.ones([4])
    g = execute(mode, lambda t: _grad(lambda a: hvd.broadcast(a, 0), t, tf.ones([4]) * (r + 1)),
                x)
    np.testing.assert_allclose(g.numpy(), np.full([4], (n + 1) / 2 if r == 0 else 0.0))


def test_alltoall_and_reducescatter_grad(mode):
    n = hvd.size()
    x = tf.ones([2 * n, 3])
    g = execute(mode, lambda t: _grad(lambda a: hvd.alltoall(a), t, tf.ones([2 * n, 3]) * 2),
                x)
    np.testing.assert_allclose(g.numpy(), np.full([2 * n, 3], 2.0))
    g = execute(mode, lambda t: _grad(lambda a: hvd.reducescatter(a, op=hvd.Average), t,
                                      tf.ones([2, 3])), x)
    np.testing.assert_allclose(g.numpy(), np.ones([2 * n, 3]))
