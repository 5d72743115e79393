"""BroadcastGlobalVariablesHook: Horovod's SessionRunHook for TF1 training loops
(tf.compat.v1.train.MonitoredTrainingSession): once the session exists, root_rank's global
variables (initialized or restored from a checkpoint) are assigned on every rank."""
import tensorflow as tf

from hvdsparse.tensorflow.functions import broadcast_global_variables


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, root_rank, device=''):
        """device: where the broadcast op is placed (as Horovod's); the values travel through
        the runtime either way."""
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op = None

    def begin(self):
        # one op per graph: a hook reused for a new graph builds its op again
        if self.bcast_op is None or self.bcast_op.graph is not tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
