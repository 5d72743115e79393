"""TfDataServiceConfig (the compute job's config file), tf_data_service and
Dataset.send_to_data_service (the training side), compute_worker_fn (the compute side), as
Horovod's horovod.tensorflow.data.compute_service.

The compute job's rank 0 serves hvdsparse.runner.compute_service; every compute rank runs one
tf.data worker; dispatchers run on the compute side (every workers_per_dispatcher-th rank) or on
the training side (tf_data_service on rank 0, or on every rank with several dispatchers)."""
import binascii
import dataclasses
import json
import os
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from hvdsparse.runner.compute_service import ComputeClient
from hvdsparse.tensorflow import mpi_ops

_SIDES = ("compute", "training")


@dataclasses.dataclass(frozen=True)
class TfDataServiceConfig:
    dispatchers: int
    workers_per_dispatcher: int
    dispatcher_side: str
    addresses: Mapping[str, Sequence[Tuple[str, int]]]
    key: bytes
    timeout: int = 60

    def __post_init__(self):
        if self.dispatcher_side not in _SIDES:
            raise ValueError("dispatcher_side must be 'compute' or 'training', got %r"
                             % (self.dispatcher_side,))

    def compute_client(self, verbose=1) -> ComputeClient:
        return ComputeClient(self.addresses, self.key, verbose=verbose)

    def to_dict(self) -> Mapping[str, Any]:
        config = dataclasses.asdict(self)
        config["key"] = binascii.hexlify(self.key).decode()
        return config

    @staticmethod
    def from_dict(config: Mapping[str, Any]) -> "TfDataServiceConfig":
        return TfDataServiceConfig(
            dispatchers=config["dispatchers"],
            workers_per_dispatcher=config["workers_per_dispatcher"],
            dispatcher_side=config["dispatcher_side"],
            addresses={intf: [(a[0], a[1]) for a in addrs]
                       for intf, addrs in config["addresses"].items()},
            key=binascii.unhexlify(config["key"]),
            timeout=config.get("timeout", 60))

    def write(self, filename: str):
        """Written whole to a temporary file beside filename, then renamed into place, so a
        reader never sees half a config. Only its owner may read it: it holds the key."""
        directory = os.path.dirname(os.path.abspath(filename))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(filename))
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.to_dict(), f)
            os.replace(tmp, filename)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @staticmethod
    def read(filename: str, wait_for_file_creation: bool = False) -> "TfDataServiceConfig":
        while wait_for_file_creation and not os.path.exists(filename):
            time.sleep(0.1)
        with open(filename) as f:
            return TfDataServiceConfig.from_dict(json.load(f))


def _stop(server):
    # tf.data's servers have no public stop
    server._stop()
    server.join()


def _start_dispatcher(compute, dispatcher_id):
    server = tf.data.experimental.service.DispatchServer()
    compute.register_dispatcher(dispatcher_id, server.target)
    return server


@contextmanager
def tf_data_service(compute_config: TfDataServiceConfig, rank: int):
    """Yields the address of this rank's tf.data dispatcher once it and all of its workers
    have registered. With dispatcher_side 'training' this rank starts the dispatcher (rank 0 for
    one dispatcher, every rank for several) and stops it on exit."""
    several = compute_config.dispatchers > 1
    if several and not 0 <= rank < compute_config.dispatchers:
        raise ValueError("rank %d has no tf.data dispatcher: with %d dispatchers, training rank r "
                         "uses dispatcher r (run as many training ranks as dispatchers, or one "
                         "dispatcher)" % (rank, compute_config.dispatchers))
    compute = compute_config.compute_client()
    server = None
    if compute_config.dispatcher_side == "training" and (several or rank == 0):
        server = _start_dispatcher(compute, rank if several else 0)
    try:
        dispatcher_id = rank if several else 0
        address = compute.wait_for_dispatcher_registration(dispatcher_id, compute_config.timeout)
        compute.wait_for_dispatcher_worker_registration(dispatcher_id, compute_config.timeout)
        yield address
    finally:
        if server is not None:
            _stop(server)


def send_to_data_service(dataset: tf.data.Dataset, compute_config: TfDataServiceConfig,
                         rank: int, size: Optional[int] = None,
                         processing_mode: str = "distributed_epoch", reuse_dataset: bool = False,
                         round_robin: bool = False) -> tf.data.Dataset:
    """The dataset, processed by the compute job's tf.data workers (compute-side dispatchers
    only: a training-side dispatcher lives as long as a tf_data_service block)."""
    if compute_config.dispatcher_side == "training":
        raise RuntimeError("training side dispatcher not supported, use tf_data_service context "
                           "manager instead")
    with tf_data_service(compute_config, rank) as address:
        return dataset.apply(tf.data.experimental.service.distribute(
            processing_mode=processing_mode, service=address,
            job_name="job" if reuse_dataset else None,
            consumer_index=rank if reuse_dataset and round_robin else None,
            num_consumers=size if reuse_dataset and round_robin else None))


tf.data.Dataset.send_to_data_service = send_to_data_service


def compute_worker_fn(compute_config: TfDataServiceConfig):
    """A compute rank: a dispatcher where this side holds them, one tf.data worker for the
    rank's dispatcher; returns when the compute service shuts down."""
    mpi_ops.init()
    rank = mpi_ops.rank()
    per = compute_config.workers_per_dispatcher
    dispatcher_id = rank // per
    compute = compute_config.compute_client()
    dispatcher = None
    if compute_config.dispatcher_side == "compute" and rank % per == 0:
        dispatcher = _start_dispatcher(compute, dispatcher_id)
    try:
        address = compute.wait_for_dispatcher_registration(dispatcher_id, compute_config.timeout)
        worker = tf.data.experimental.service.WorkerServer(
            tf.data.experimental.service.WorkerConfig(
                dispatcher_address=address.split("://")[-1], heartbeat_interval_ms=1000,
                dispatcher_timeout_ms=compute_config.timeout * 1000))
        worker.start()
        try:
            compute.register_worker_for_dispatcher(dispatcher_id, rank)
            compute.wait_for_shutdown()
        finally:
            _stop(worker)
    finally:
        if dispatcher is not None:
            _stop(dispatcher)
