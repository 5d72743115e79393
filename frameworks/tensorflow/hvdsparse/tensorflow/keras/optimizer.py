"""The distributed optimizer class: a subclass of the wrapped optimizer's own class whose
gradients are allreduced (or, with backward_passes_per_step > 1, aggregated locally and
allreduced every N steps) before they are applied.

It covers the three optimizer APIs TensorFlow 2 meets: Keras 3 (apply / apply_gradients),
tf_keras's optimizer (compute_gradients / minimize / apply_gradients) and tf_keras's legacy
OptimizerV2 (_compute_gradients / get_gradients / apply_gradients). Gradients are reduced once
per step: where they are computed when the optimizer computes them (minimize, as tf_keras's
model.fit does), else in apply."""
import tensorflow as tf

from hvdsparse.tensorflow.gradient_tape import allreduce_skipping_local
from hvdsparse.tensorflow.keras.local_aggregation import LocalGradientAggregator, _key


class _StepState:
    """Per optimizer: the local variables, the aggregator, and the gradients last reduced by
    compute_gradients (apply applies those as they are)."""

    def __init__(self, optimizer):
        self.local = set()
        self.reduced = None
        self.aggregator = None
        if optimizer._hvds_passes > 1:
            self.aggregator = LocalGradientAggregator(
                optimizer._hvds_passes, optimizer._hvds_average_aggregated,
                optimizer._hvds_options["sparse_as_dense"], optimizer._hvds_allreduce)


class _DistributedOptimizerMixin:
    # Set per wrapped class by distributed_class: the allreduce_gradients options,
    # backward_passes_per_step, average_aggregated_gradients, scale_local_gradients.
    _hvds_options = {}
    _hvds_passes = 1
    _hvds_average_aggregated = False
    _hvds_scale_local = True

    def _hvds_state(self):
        # Made on first use: load_model's wrapping in place runs no __init__.
        state = self.__dict__.get("_hvds_step_state")
        if state is None:
            state = _StepState(self)
            object.__setattr__(self, "_hvds_step_state", state)
        return state

    @property
    def _agg_helper(self):
        """The local gradient aggregator (its `counter` counts the steps summed), or None."""
        return self._hvds_state().aggregator

    def register_local_var(self, var):
        """Marks a variable as local to this worker: its gradient is not allreduced (divided by
        the set size when scale_local_gradients)."""
        self._hvds_state().local.add(_key(var))

    def _hvds_allreduce(self, grads, variables):
        local = self._hvds_state().local
        flags = [variables is not None and _key(v) in local for v in (variables or grads)]
        return allreduce_skipping_local(list(grads), list(variables or [None] * len(grads)),
                                        flags, self._hvds_scale_local and any(flags),
                                        **self._hvds_options)

    def _hvds_reduce(self, grads, variables):
        """One step's gradients as they are to be applied; remembered so apply does not
        reduce them again."""
        aggregator = self._hvds_state().aggregator
        if aggregator is not None:
            grads = aggregator.accumulate(list(grads), variables)
        else:
            grads = self._hvds_allreduce(grads, variables)
        self._hvds_state().reduced = list(grads)
        return grads

    def _hvds_take_reduced(self, grads):
        """True when grads are the ones compute_gradients returned (already reduced)."""
        state = self._hvds_state()
        reduced, state.reduced = state.reduced, None
        return (reduced is not None and len(reduced) == len(grads) and
                all(a is b for a, b in zip(reduced, grads)))

    def _hvds_apply(self, apply, grads, variables):
        if not self._hvds_take_reduced(grads):
            grads = self._hvds_reduce(grads, variables)
            self._hvds_state().reduced = None
        aggregator = self._hvds_state().aggregator
        if aggregator is None:
            return apply(grads)
        self._hvds_build(variables)
        return aggregator.apply_on_reducing_steps(lambda: apply(grads), self.iterations)

    def _hvds_build(self, variables):
        # A Keras 3 optimizer's slots must exist before apply runs inside a tf.cond branch
        # (tf_keras's build in an init_scope themselves).
        if hasattr(self, "stateless_apply") and not self.built and variables is not None:
            with tf.init_scope():
                self.build(variables)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        base = super()
        if hasattr(base, "_compute_gradients"):  # legacy OptimizerV2
            grads_and_vars = base._compute_gradients(loss, var_list, grad_loss, tape)
        elif hasattr(base, "compute_gradients"):  # tf_keras optimizer
            grads_and_vars = base.compute_gradients(loss, var_list, tape)
        else:  # Keras 3 optimizers do not compute gradients
            variables = var_list() if callable(var_list) else var_list
            tape = tape if tape is not None else tf.GradientTape()
            if callable(loss):
                with tape:
                    tape.watch(variables)
                    loss = loss()
            grads_and_vars = list(zip(tape.gradient(loss, variables), variables))
        grads, variables = zip(*grads_and_vars)
        return list(zip(self._hvds_reduce(grads, list(variables)), variables))

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def get_gradients(self, loss, params):
        return self._hvds_reduce(super().get_gradients(loss, params), params)


class _KerasApply:
    """Keras 3: model.fit and apply_gradients both end in apply()."""

    def apply(self, grads, trainable_variables=None):
        base = super()
        variables = trainable_variables
        if variables is None and self.built:
            variables = self._trainable_variables
        return self._hvds_apply(lambda g: base.apply(g, trainable_variables), list(grads),
                                variables)


class _TfKerasApply:
    """tf_keras (optimizer and legacy OptimizerV2): apply_gradients."""

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        base = super()
        grads_and_vars = list(grads_and_vars)
        variables = [v for _, v in grads_and_vars]
        return self._hvds_apply(
            lambda g: base.apply_gradients(list(zip(g, variables)), *args, **kwargs),
            [g for g, _ in grads_and_vars], variables)


def distributed_class(cls, options, backward_passes_per_step=1,
                      average_aggregated_gradients=False, scale_local_gradients=True):
    """A subclass of the optimizer class cls that keeps its name and module (serialisation,
    summaries)."""
    apply = _KerasApply if hasattr(cls, "stateless_apply") else _TfKerasApply
    namespace = {"_hvds_options": options, "_hvds_passes": backward_passes_per_step,
                 "_hvds_average_aggregated": average_aggregated_gradients,
                 "_hvds_scale_local": scale_local_gradients, "__module__": cls.__module__}
    return type(cls.__name__, (apply, _DistributedOptimizerMixin, cls), namespace)
