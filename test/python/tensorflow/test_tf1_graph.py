"""TF1 graphs run by a tf.compat.v1.Session (Horovod's test_tensorflow.py runs every test so
before running it eagerly): collectives are py_functions the session runs in any order."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd


def _session(graph):
    # inter_op_parallelism_threads 0: the sessions' shared pool, sized by the binding at import
    # (conftest's tf.config value would otherwise be inherited)
    return tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto())


def test_many_independent_collectives_in_one_run():
    """More collectives than a small inter-op pool has threads, fetched in one run: ranks start
    them in different orders (once a hang)."""
    n = hvd.size()
    with tf.Graph().as_default() as g:
        outs = [hvd.allreduce(tf.fill([i + 1], float(hvd.rank() + i)), op=hvd.Sum)
                for i in range(24)]
        outs += hvd.grouped_allgather([tf.fill([hvd.rank() + 1], i) for i in range(4)])
        with _session(g) as sess:
            got = sess.run(outs)
    for i in range(24):
        np.testing.assert_array_equal(got[i], [sum(r + i for r in range(n))] * (i + 1))
    np.testing.assert_array_equal(got[24 + 3], [3] * (n * (n + 1) // 2))


def test_mismatch_raises_failed_precondition_on_every_rank():
    with tf.Graph().as_default() as g:
        y = hvd.allreduce(tf.ones([hvd.rank() + 2]))
        z = hvd.allreduce(tf.ones([2]), op=hvd.Sum)
        with _session(g) as sess:
            with pytest.raises(tf.errors.FailedPreconditionError,
                               match="Mismatched ALLREDUCE tensor shapes"):
                sess.run(y)
            np.testing.assert_array_equal(sess.run(z), [hvd.size()] * 2)


def test_inplace_broadcast_and_global_variables():
    root = hvd.size() - 1
    with tf.Graph().as_default() as g:
        res = tf.Variable(tf.fill([3], float(hvd.rank())))
        ref = tf.compat.v1.Variable(tf.fill([2], hvd.rank()), use_resource=False)
        other = tf.Variable(tf.fill([2], float(hvd.rank())))
        values = hvd.broadcast_([res, ref], root_rank=root)
        bcast_all = hvd.broadcast_global_variables(root_rank=0)
        with _session(g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            got = sess.run(values)
            np.testing.assert_array_equal(got[0], [root] * 3)
            np.testing.assert_array_equal(sess.run(ref), [root] * 2)
            sess.run(bcast_all)
            np.testing.assert_array_equal(sess.run(other), [0.0] * 2)


def test_broadcast_global_variables_refused_eagerly():
    with pytest.raises(RuntimeError, match="eager"):
        hvd.broadcast_global_variables(root_rank=0)


def test_objects_while_a_graph_is_built():
    with tf.Graph().as_default():
        assert hvd.broadcast_object({"r": hvd.rank()}, root_rank=0) == {"r": 0}
        assert hvd.allgather_object(hvd.rank()) == list(range(hvd.size()))


def test_alltoall_without_splits_returns_the_output_only():
    n = hvd.size()
    with tf.Graph().as_default() as g:
        out = hvd.alltoall(tf.zeros([n, 0], tf.uint8))
        with _session(g) as sess:
            assert sess.run(tf.size(out)) == 0


def test_indexed_slices_without_dense_shape_as_horovod():
    """Average divides with `/` (integer values come back as floats); scaling is refused."""
    n = hvd.size()
    s = tf.IndexedSlices(tf.ones([1, 3], tf.int32), tf.constant([hvd.rank()]))
    avg = hvd.allreduce(s, op=hvd.Average)
    assert avg.values.dtype == tf.float64
    np.testing.assert_allclose(avg.values.numpy(), np.full([n, 3], 1.0 / n))
    for kw in ({"prescale_factor": 0.5}, {"postscale_factor": 0.5}):
        with pytest.raises(NotImplementedError):
            hvd.allreduce(s, op=hvd.Sum, **kw)


@pytest.mark.parametrize("over", ["global", "evens"])
def test_legacy_optimizer_averages_gradients_over_its_process_set(over):
    """hvd.DistributedOptimizer around a tf.compat.v1.train.Optimizer, as in Horovod: the step
    applies the gradient averaged over the set; a rank outside it steps on its own."""
    n, r = hvd.size(), hvd.rank()
    ps = hvd.add_process_set([i for i in range(n) if i % 2 == 0]) if over == "evens" \
        else hvd.global_process_set
    try:
        with tf.Graph().as_default() as g:
            w = tf.compat.v1.Variable([1.0, 2.0], use_resource=False)
            loss = tf.reduce_sum(w * float(r + 1))  # d loss / d w = r + 1
            opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                           process_set=ps)
            pairs = opt.compute_gradients(loss, var_list=[w])
            step = opt.apply_gradients(pairs)
            with _session(g) as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                sess.run(step)
                got = sess.run(w)
        grad = sum(i + 1 for i in ps.ranks) / len(ps.ranks) if ps.included() else r + 1
        np.testing.assert_allclose(got, [1.0 - grad, 2.0 - grad])
    finally:
        if over == "evens":
            hvd.remove_process_set(ps)


def _aggregated_run(opt_factory, passes, average, steps):
    """w (2 values) trained for `steps` passes on loss sum(w * x), x = rank + 1 + pass: returns
    w and global_step after each pass."""
    r = hvd.rank()
    with tf.Graph().as_default() as g:
        w = tf.compat.v1.Variable([1.0, 2.0])
        x = tf.compat.v1.placeholder(tf.float32, [])
        step = tf.compat.v1.train.get_or_create_global_step()
        opt = hvd.DistributedOptimizer(opt_factory(), backward_passes_per_step=passes,
                                       average_aggregated_gradients=average)
        pairs = opt.compute_gradients(tf.reduce_sum(w * x), var_list=[w])
        train = opt.apply_gradients(pairs, global_step=step)
        seen = []
        with _session(g) as sess:
            sess.run([tf.compat.v1.global_variables_initializer(),
                      tf.compat.v1.local_variables_initializer()])
            for i in range(steps):
                sess.run(train, {x: float(r + 1 + i)})
                seen.append((sess.run(w), sess.run(step)))
    return seen


@pytest.mark.parametrize("average", [True, False])
def test_legacy_optimizer_aggregates_backward_passes(average):
    """backward_passes_per_step=3: passes 3 and 6 apply the set's average of the three passes'
    summed gradients (divided by 3 with average_aggregated_gradients); the others apply nothing;
    global_step counts every pass."""
    n = hvd.size()
    seen = _aggregated_run(lambda: tf.compat.v1.train.GradientDescentOptimizer(1.0), 3,
                           average, 6)
    w, expect = np.array([1.0, 2.0]), []
    for i in range(6):
        if i % 3 == 2:
            total = sum(sum(q + 1 + j for j in range(i - 2, i + 1)) for q in range(n)) / n
            w = w - (total / 3 if average else total)
        expect.append(w.copy())
    for i, (got, step) in enumerate(seen):
        np.testing.assert_allclose(got, expect[i], rtol=1e-6)
        assert step == i + 1


def test_legacy_optimizer_aggregation_with_slots():
    """Momentum creates its slots inside the conditional apply: equal to momentum stepped every
    2nd pass on the averaged sums."""
    n = hvd.size()
    seen = _aggregated_run(lambda: tf.compat.v1.train.MomentumOptimizer(0.5, 0.9), 2, True, 4)
    w, velocity = np.array([1.0, 2.0]), 0.0
    for i in (1, 3):
        grad = sum(sum(q + 1 + j for j in (i - 1, i)) for q in range(n)) / n / 2
        velocity = 0.9 * velocity + grad
        w = w - 0.5 * velocity
    np.testing.assert_allclose(seen[-1][0], w, rtol=1e-6)
    np.testing.assert_allclose(seen[0][0], [1.0, 2.0])


def test_legacy_optimizer_aggregates_sparse_gradients():
    """An embedding's IndexedSlices gradient is summed densely and averaged over the set."""
    n, r = hvd.size(), hvd.rank()
    with tf.Graph().as_default() as g:
        table = tf.compat.v1.Variable(tf.zeros([n, 2]))
        loss = tf.reduce_sum(tf.gather(table, [r]) * float(r + 1))
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                       backward_passes_per_step=2, sparse_as_dense=True)
        train = opt.apply_gradients(opt.compute_gradients(loss, var_list=[table]))
        with _session(g) as sess:
            sess.run([tf.compat.v1.global_variables_initializer(),
                      tf.compat.v1.local_variables_initializer()])
            sess.run(train)
            np.testing.assert_array_equal(sess.run(table), np.zeros([n, 2]))
            sess.run(train)
            got = sess.run(table)
    # each rank's row: two passes of (q + 1), averaged over n ranks, not divided by the passes
    np.testing.assert_allclose(got, [[-2.0 * (q + 1) / n] * 2 for q in range(n)], rtol=1e-6)


def test_legacy_optimizer_aggregation_needs_a_graph():
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                   backward_passes_per_step=2)
    w = tf.Variable([1.0])
    with pytest.raises(NotImplementedError, match="TF1 graph"):
        opt.compute_gradients(lambda: tf.reduce_sum(w), var_list=[w])
    with pytest.raises(ValueError, match="at least 1"):
        hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                 backward_passes_per_step=0)


def test_broadcast_global_variables_hook_in_a_monitored_session():
    """Every rank starts from root's values (initialized differently on each rank); the hook
    builds its op again for a new graph."""
    root = hvd.size() - 1
    hook = hvd.BroadcastGlobalVariablesHook(root)
    for _ in range(2):
        with tf.Graph().as_default():
            w = tf.compat.v1.Variable(tf.fill([3], float(hvd.rank())))
            step = tf.compat.v1.train.get_or_create_global_step()
            with tf.compat.v1.train.MonitoredTrainingSession(
                    hooks=[hook], config=tf.compat.v1.ConfigProto()) as sess:
                np.testing.assert_array_equal(sess.run(w), [root] * 3)
                assert sess.run(step) == 0
