"""Local gradient aggregation for the tf.compat.v1 DistributedOptimizer (Horovod's
backward_passes_per_step in TF1 graphs): each pass adds its gradients to local sums; every N-th
pass allreduces the sums (divided by N with average_aggregated_gradients) and the wrapped
optimizer applies them. The other passes apply nothing and only advance global_step, so a
training loop counts every pass."""
import tensorflow as tf

from hvdsparse.tensorflow import mpi_ops


class LocalAggregation:
    def __init__(self, passes, average):
        self.passes = passes
        self.average = average
        self._graph = None

    def compute(self, pairs, allreduce):
        """pairs: the wrapped optimizer's (gradient, variable) list; allreduce(grads, vars)
        reduces a list of dense gradients. Returns the pairs to hand to apply()."""
        if mpi_ops._executing_eagerly():
            raise NotImplementedError(
                "backward_passes_per_step > 1 with a tf.compat.v1 optimizer needs a TF1 graph "
                "(as Horovod's); eagerly, use a Keras optimizer or hvd.DistributedGradientTape")
        kept = [i for i, (g, _) in enumerate(pairs) if g is not None]
        grads = [tf.convert_to_tensor(pairs[i][0]) for i in kept]
        variables = [pairs[i][1] for i in kept]
        self._make_state(grads, variables)
        adds = [s.assign_add(g, read_value=False) for s, g in zip(self._sums, grads)]
        with tf.control_dependencies(adds):
            count = self._counter.assign(tf.math.floormod(self._counter + 1, self.passes))
        with tf.control_dependencies([count]):
            sums = [s.read_value() for s in self._sums]
            this_pass = [tf.identity(g) for g in grads]

        def reduce():
            out = allreduce(sums, variables)
            if self.average:
                out = [o / tf.cast(self.passes, o.dtype) for o in out]
            with tf.control_dependencies(out):
                resets = [s.assign(tf.zeros_like(s)) for s in self._sums]
            with tf.control_dependencies(resets):
                return [tf.identity(o) for o in out]

        reduced = tf.cond(tf.equal(count, 0), reduce, lambda: this_pass)
        reduced = list(reduced) if isinstance(reduced, (list, tuple)) else [reduced]
        out = [(None, v) for _, v in pairs]
        for i, g in zip(kept, reduced):
            out[i] = (g, pairs[i][1])
        return out

    def apply(self, grads_and_vars, apply_closure, global_step):
        """Runs apply_closure on the passes that reduced; the others advance global_step."""
        grads = [g for g, _ in grads_and_vars if g is not None]
        with tf.control_dependencies(grads):
            ready = tf.equal(self._counter.read_value(), 0)

        def skip():
            if global_step is None:
                return tf.no_op()
            return tf.group(global_step.assign_add(tf.constant(1, global_step.dtype.base_dtype),
                                                   use_locking=True, read_value=False))

        return tf.cond(ready, lambda: tf.group(apply_closure()), skip)

    def _make_state(self, grads, variables):
        graph = tf.compat.v1.get_default_graph()
        if self._graph is graph:
            return
        local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        self._counter = tf.compat.v1.Variable(0, dtype=tf.int32, trainable=False,
                                              collections=local, use_resource=True,
                                              name="aggregation_counter")
        self._sums = [
            tf.compat.v1.Variable(tf.zeros(_dense_shape(g, v), g.dtype), trainable=False,
                                  collections=local, use_resource=True,
                                  name="aggregated_gradient")
            for g, v in zip(grads, variables)]
        self._graph = graph


def _dense_shape(grad, var):
    # the variable's shape when known: a gradient's static shape may be partial
    shape = var.shape if var.shape.is_fully_defined() else grad.shape
    if not shape.is_fully_defined():
        raise ValueError("backward_passes_per_step > 1 needs gradients of known shape; "
                         "variable %s has shape %s" % (var.name, shape))
    return shape
