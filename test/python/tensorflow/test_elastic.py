"""hvd.elastic for TensorFlow outside an elastic job's failures: TensorFlowState's
save/restore/sync/commit and elastic.run's retry loop, with a failure raised eagerly and one from
inside tf.function (the Keras states and callbacks are in keras/test_keras_elastic.py; the
end-to-end run with a killed worker is in test/python/elastic/)."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from hvdsparse.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hvdsparse.tensorflow.runtime_calls import HorovodAbortedError


def assign(variables, values):
    for v, value in zip(variables, values):
        v.assign(value)


def numpy(variables):
    return [v.numpy() for v in variables]


def test_state_syncs_from_rank_0_restores_and_commits():
    v = 1.0 if hvd.rank() == 0 else 2.0
    variables = [tf.Variable(np.full((2, 2), v)), tf.Variable(np.full((2,), v))]
    other = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.0, 0.0])]
    state = hvd.elastic.TensorFlowState(variables, batch=20 + hvd.rank(), epoch=10 + hvd.rank())
    assert state.variables == variables and state.session is None
    state.sync()
    for w in numpy(variables):
        np.testing.assert_array_equal(w, np.ones_like(w))
    assert (state.batch, state.epoch) == (20, 10)
    # Changed, then restored: back to what sync gave.
    assign(variables, other)
    state.batch, state.epoch = 21, 11
    state.restore()
    for w in numpy(variables):
        np.testing.assert_array_equal(w, np.ones_like(w))
    assert (state.batch, state.epoch) == (20, 10)
    # Changed and committed, changed again, restored: back to the commit.
    assign(variables, other)
    state.batch, state.epoch = 21, 11
    state.commit()
    assign(variables, [w + 5 for w in other])
    state.batch = 30
    state.restore()
    for w, expected in zip(numpy(variables), other):
        np.testing.assert_array_equal(w, expected)
    assert (state.batch, state.epoch) == (21, 11)


def test_state_refuses_a_session():
    with pytest.raises(NotImplementedError):
        hvd.elastic.TensorFlowState([tf.Variable(1.0)], session=object())


def test_run_restores_after_an_internal_error_and_retries():
    step = tf.Variable(5.0)
    state = hvd.elastic.TensorFlowState([step], epoch=0)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        calls.append(float(step.numpy()))
        step.assign_add(1.0)
        state.epoch += 1
        if len(calls) == 1:
            raise HorovodAbortedError("a peer failed")
        state.commit()
        return float(step.numpy())

    assert train(state) == 6.0  # the first try's step was rolled back
    assert calls == [5.0, 5.0] and state.epoch == 1
    assert resets == [hvd.size()] and hvd.is_initialized()


def _fails_in_graph(times):
    """A tf.function whose py_function raises HorovodAbortedError its first `times` calls, as a
    collective does in model.fit's train step when a peer dies."""
    count = [0]

    def body():
        count[0] += 1
        if count[0] <= times:
            raise HorovodAbortedError("Horovod: peer 1 died during ALLREDUCE")
        return np.int32(count[0])

    @tf.function
    def step():
        return tf.py_function(body, [], Tout=tf.int32)
    return step


def test_run_takes_a_failure_inside_tf_function_as_internal_error():
    step = _fails_in_graph(1)
    value = tf.Variable(0.0)
    state = hvd.elastic.TensorFlowState([value])
    tries = []

    @hvd.elastic.run
    def train(state):
        tries.append(float(value.numpy()))
        value.assign_add(1.0)
        return int(step())

    assert train(state) == 2 and tries == [0.0, 0.0]


def test_run_lets_other_errors_through():
    def body():
        raise KeyError("not a collective")

    @tf.function
    def bad():
        return tf.py_function(body, [], Tout=tf.int32)

    @hvd.elastic.run
    def train(state):
        return bad()

    with pytest.raises(tf.errors.OpError) as info:
        train(hvd.elastic.TensorFlowState([tf.Variable(0.0)]))
    assert not isinstance(info.value, HorovodInternalError)


def test_run_keeps_the_state_after_hosts_updated():
    value = tf.Variable(0.0)
    state = hvd.elastic.TensorFlowState([value])
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(float(value.numpy()))
        value.assign_add(1.0)
        if len(calls) == 1:
            state.commit()
            value.assign_add(10.0)  # not committed, but kept: nothing is restored
            raise HostsUpdatedInterrupt(False)
        return float(value.numpy())

    # The sync sends rank 0's variables as they are.
    assert train(state) == 12.0 and calls == [0.0, 11.0]


def test_a_step_traced_at_size_1_keeps_its_reduction_in_an_elastic_job(monkeypatch):
    from hvdsparse.tensorflow import gradient_tape
    grad = tf.constant([float(hvd.rank())])
    expected = (hvd.size() - 1) / 2.0
    # The global set as a step traced while the job had one worker saw it.
    monkeypatch.setattr(hvd.global_process_set, "size", lambda: 1)
    kept = gradient_tape.allreduce_gradients([grad])
    assert float(kept[0].numpy()[0]) == float(hvd.rank())  # a fixed job skips it at size 1
    monkeypatch.setenv("HVDSPARSE_ELASTIC", "1")

    @tf.function
    def step(g):
        return gradient_tape.allreduce_gradients([g])[0]

    traced = step.get_concrete_function(grad)  # traced at "size 1"
    monkeypatch.undo()
    # Run while the job has hvd.size() workers: the reduction is there.
    assert float(traced(grad).numpy()[0]) == expected
