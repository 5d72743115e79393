"""An elastic Keras job for elastic_test.py: a small model trained by model.fit under
hvd.elastic.run with KerasState and the three elastic callbacks (a commit a batch), EPOCHS
epochs of STEPS batches. ELASTIC_TEST_KILL_AT=S: at global batch S (epoch * STEPS + batch),
while the job has 3 ranks, rank 2 SIGKILLs itself.
Prints "STEP <global batch> SIZE <size> AT <time>" per batch, "SYNCED SIZE <size> EPOCH <epoch>
BATCH <batch>" each time training (re)starts, "KILLED AT <time>" and, at the end,
"DONE EPOCH <epochs done> SIZE <size> RANK <rank> EQUAL <weights equal on every rank>".
"""
import os
import signal
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvdsparse.tensorflow.keras as hvd  # noqa: E402

EPOCHS = int(os.environ.get("ELASTIC_TEST_EPOCHS", "4"))
STEPS = int(os.environ.get("ELASTIC_TEST_STEPS", "10"))
KILL_AT = int(os.environ.get("ELASTIC_TEST_KILL_AT", "-1"))

tf.config.threading.set_inter_op_parallelism_threads(2)
tf.config.threading.set_intra_op_parallelism_threads(1)
hvd.init()
tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="tanh"),
                             tf.keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01, momentum=0.9)),
              loss="mse")
rng = np.random.RandomState(100 + hvd.rank())
x = rng.randn(64, 16).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).repeat().batch(8)

state = hvd.elastic.KerasState(model, batch=0, epoch=0)


class Events(tf.keras.callbacks.Callback):
    """Kills rank 2 at global batch KILL_AT and reports every batch."""

    def on_train_batch_begin(self, batch, logs=None):
        step = state.epoch * STEPS + batch
        if step == KILL_AT and hvd.size() == 3 and hvd.rank() == 2:
            print("KILLED AT %.6f" % time.time(), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_batch_end(self, batch, logs=None):
        print("STEP %d SIZE %d AT %.6f" % (state.epoch * STEPS + batch + 1, hvd.size(),
                                          time.time()), flush=True)


callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
             hvd.elastic.UpdateBatchStateCallback(state),
             hvd.elastic.CommitStateCallback(state), Events()]


@hvd.elastic.run
def train(state):
    print("SYNCED SIZE %d EPOCH %d BATCH %d" % (hvd.size(), state.epoch, state.batch), flush=True)
    model.fit(dataset, steps_per_epoch=STEPS, epochs=EPOCHS - state.epoch, callbacks=callbacks,
              verbose=0)


train(state)
every = hvd.allgather_object(model.get_weights())
equal = all(np.array_equal(a, b) for other in every for a, b in zip(other, every[0]))
print("DONE EPOCH %d SIZE %d RANK %d EQUAL %s" % (state.epoch, hvd.size(), hvd.rank(), equal),
      flush=True)
hvd.shutdown()
