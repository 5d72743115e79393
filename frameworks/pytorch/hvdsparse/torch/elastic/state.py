"""TorchState: a model, an optimizer, elastic samplers and plain values kept across resets."""
import copy

from hvdsparse.common.elastic import HandlerState
from hvdsparse.torch import mpi_ops
from hvdsparse.torch.elastic.sampler import ElasticSampler
from hvdsparse.torch.functions import (allgather_object, broadcast_object,
                                       broadcast_optimizer_state, broadcast_parameters)


class _StateDictHandler:
    """Keeps a copy of an object's state_dict(): save() takes it, restore() puts it back."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def reset(self):
        pass


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)
        self.save()


class _OptimizerHandler(_StateDictHandler):
    def restore(self):
        super().restore()
        self.reset()

    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)
        self.save()

    def reset(self):
        # Allreduces started before the reset belong to the runtime that stopped.
        drop = getattr(self.value, "_drop_pending", None)
        if drop is not None:
            drop()


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        # Every rank processed its own samples since the last sync: the job has done the union.
        done = set()
        for indices in allgather_object(set(self.value.processed_indices)):
            done.update(indices)
        state = self.value.state_dict()
        state["processed_indices"] = done
        state["processed_num"] = len(done)
        self.value.load_state_dict(broadcast_object(state, root_rank=0))
        self.save()

    def reset(self):
        self.value.reset()


class TorchState(HandlerState):
    """Horovod's hvd.elastic.TorchState(model=None, optimizer=None, **kwargs): commit() saves
    copies of the model's and the optimizer's state dicts, of every ElasticSampler given as a
    keyword and of the other keywords; restore() loads the copies; sync() broadcasts them all
    from rank 0, and keeps them as the saved copies (a restore before the next commit returns
    to the synced state)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        handlers, values = {}, {}
        if model is not None:
            handlers["model"] = _ModelHandler(model)
        if optimizer is not None:
            handlers["optimizer"] = _OptimizerHandler(optimizer)
        for name, value in kwargs.items():
            if isinstance(value, ElasticSampler):
                handlers[name] = _SamplerHandler(value)
            else:
                values[name] = value
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super().__init__(handlers.values(), bcast_object=broadcast_object,
                         get_rank=mpi_ops.rank, **values)
