"""ElasticSampler: splits what is left of an epoch among the ranks of the current membership."""
import math
import random

import torch.utils.data

from hvdsparse.torch import mpi_ops


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=0). Record each batch
    with record_batch(); after a reset the samples not yet processed this epoch (on any rank)
    are divided anew among the ranks. Give it to TorchState as a keyword so that commits save
    it. processed_num is Horovod 0.28's count of the job's samples processed this epoch: each
    record_batch adds batch_size times the ranks, and a sync sets it to the samples every rank
    recorded together."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.processed_num = 0
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch: nothing of it is processed yet."""
        self.epoch = epoch
        self.processed_indices = set()
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks this rank's batch batch_idx (of batch_size samples) as processed."""
        self.processed_indices.update(self.get_indices(batch_idx, batch_size))
        self.processed_num += batch_size * self.num_replicas

    def record_indices(self, indices):
        """Marks these dataset indices, processed by this rank, as processed."""
        indices = list(indices)
        self.processed_indices.update(indices)
        self.processed_num += len(indices) * self.num_replicas

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices),
                "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.processed_num = state_dict.get("processed_num", len(self.processed_indices))
        self.reset()

    def reset(self):
        """Divides the samples not yet processed this epoch among the current ranks; the next
        iteration (not get_indices before it) follows the new division."""
        self.num_replicas = max(1, mpi_ops.size()) if mpi_ops.is_initialized() else 1
        self.rank = mpi_ops.rank() if mpi_ops.is_initialized() else 0
        left = [i for i in range(len(self.dataset)) if i not in self.processed_indices]
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(left)
        self.remaining_indices = left
        self.num_samples = int(math.ceil(len(left) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def _my_indices(self):
        padded = self.remaining_indices[:]
        padded += padded[:self.total_size - len(padded)]
        return padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._my_indices()
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
