"""SyncBatchNormalization on every rank's slice of a batch equals BatchNormalization on the
whole batch: outputs, moving statistics and input gradients."""
import numpy as np
import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd


def _global_batch(channels):
    rows = [np.arange(4 * channels, dtype=np.float32).reshape(4, channels) * (r + 1) + r
            for r in range(hvd.size())]
    return tf.constant(np.stack(rows))  # [ranks, 4, channels]: rank r's batch is x[r]


def _outputs_and_input_grad(layer, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(y * weights)
    return y, tape.gradient(loss, x)


@pytest.mark.parametrize("channels", [1, 2])
def test_matches_batch_norm_on_the_global_batch(mode, channels):
    x = _global_batch(channels)
    weights = tf.reshape(tf.range(tf.size(x), dtype=tf.float32) % 5, x.shape)
    bn = tf.keras.layers.BatchNormalization(axis=2)
    sync_bn = hvd.SyncBatchNormalization(axis=2)
    r = hvd.rank()

    def sync_step():
        return _outputs_and_input_grad(sync_bn, x[r:r + 1], weights[r:r + 1])
    if mode == "graph":
        sync_step = tf.function(sync_step)
    y, grad = sync_step()
    y_ref, grad_ref = _outputs_and_input_grad(bn, x, weights)
    np.testing.assert_allclose(y.numpy(), y_ref.numpy()[r:r + 1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grad.numpy(), grad_ref.numpy()[r:r + 1], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(sync_bn.moving_mean.numpy(), bn.moving_mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(sync_bn.moving_variance.numpy(), bn.moving_variance.numpy(),
                               rtol=1e-5)


def test_fused_is_refused():
    with pytest.raises(ValueError, match="fused"):
        hvd.SyncBatchNormalization(fused=True)
