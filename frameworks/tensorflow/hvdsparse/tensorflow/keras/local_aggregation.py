"""Local gradient aggregation (DistributedOptimizer's backward_passes_per_step > 1).

Each step's gradients are summed into one accumulator per gradient; only every N-th step are
the sums reduced over the ranks (divided by N with average_aggregated_gradients) and the
accumulators zeroed, and only on those steps does the optimizer apply them. On the other steps
it only counts the step in its iterations. `counter` is the number of steps summed since the
last reduction, as in Horovod (0 right after a reducing step)."""
import tensorflow as tf


class LocalGradientAggregator:

    def __init__(self, backward_passes_per_step, average_aggregated_gradients, sparse_as_dense,
                 reduce_fn):
        """reduce_fn(grads, variables) reduces one list of dense gradients over the ranks."""
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self.average_aggregated_gradients = average_aggregated_gradients
        self.sparse_as_dense = sparse_as_dense
        self._reduce_fn = reduce_fn
        self._sums = {}
        with tf.init_scope():  # also when first used inside a tf.function
            self.counter = tf.Variable(0, dtype=tf.int32, trainable=False,
                                       name="hvds_aggregation_counter")

    def _dense(self, grad):
        if not isinstance(grad, tf.IndexedSlices):
            return grad
        if not self.sparse_as_dense:
            raise ValueError("IndexedSlices gradients are not supported with "
                             "backward_passes_per_step > 1 unless sparse_as_dense=True")
        return tf.convert_to_tensor(grad)

    def _sum_for(self, key, grad):
        if key not in self._sums:
            with tf.init_scope():
                self._sums[key] = tf.Variable(tf.zeros(grad.shape, grad.dtype), trainable=False,
                                              name="hvds_aggregated_gradient")
        return self._sums[key]

    def accumulate(self, grads, variables):
        """Adds one step's gradients to the sums. Returns the sums reduced over the ranks on every
        backward_passes_per_step-th call (and zeroes them), the local sums otherwise; None
        gradients stay None."""
        keys = [_key(v) for v in variables] if variables is not None else range(len(grads))
        present, sums = [], []
        for i, (key, grad) in enumerate(zip(keys, grads)):
            if grad is None:
                continue
            grad = self._dense(grad)
            acc = self._sum_for(key, grad)
            acc.assign_add(grad)
            present.append(i)
            sums.append(acc.read_value())
        self.counter.assign_add(1)
        present_vars = [variables[i] for i in present] if variables is not None else None

        def reduce_and_clear():
            reduced = self._reduce_fn(list(sums), present_vars)
            if self.average_aggregated_gradients:
                reduced = [r / self.backward_passes_per_step for r in reduced]
            with tf.control_dependencies(reduced):
                self.counter.assign(0)
                for i in present:
                    acc = self._sums[keys[i]]
                    acc.assign(tf.zeros_like(acc))
            return [tf.identity(r) for r in reduced]

        if sums:
            sums = tf.cond(tf.equal(self.counter, self.backward_passes_per_step),
                           reduce_and_clear, lambda: [tf.identity(s) for s in sums])
        else:
            self.counter.assign(self.counter % self.backward_passes_per_step)
        out = [None] * len(grads)
        for i, s in zip(present, sums):
            out[i] = s
        return out

    def apply_on_reducing_steps(self, apply, iterations):
        """Runs apply() on the steps whose gradients were just reduced; on the other steps only
        adds one to the optimizer's iterations."""
        def run():
            apply()
            return tf.constant(True)

        def skip():
            iterations.assign_add(tf.cast(1, iterations.dtype))
            return tf.constant(False)
        return tf.cond(tf.equal(self.counter, 0), run, skip)


def _key(variable):
    """A hashable identity for a variable (Keras 3 variables have no ref())."""
    return variable.ref() if hasattr(variable, "ref") else id(variable)
