"""The tf.data service integration (hvdsparse.tensorflow.data, Horovod's horovod.tensorflow.data):
every rank of the job runs a compute rank in a thread (compute_worker.main, as Horovod's own
test does) and consumes a dataset through it; the compute service's checks and errors."""
import os
import stat
import threading
from collections import Counter

import pytest
import tensorflow as tf

import hvdsparse.tensorflow as hvd
from hvdsparse.runner.channel import ChannelError
from hvdsparse.runner.compute_service import ComputeService
from hvdsparse.tensorflow.data import compute_worker
from hvdsparse.tensorflow.data.compute_service import TfDataServiceConfig, tf_data_service

TIMEOUT = 30


def _start_compute(dispatchers, side, configfile):
    errors = []

    def run():
        try:
            compute_worker.main(dispatchers, side, configfile, TIMEOUT)
        except Exception as e:  # reported by the test, not lost in the thread
            errors.append(e)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def _finish(config, thread, errors):
    hvd.barrier()  # every rank has consumed before the workers go
    if hvd.rank() == 0:
        config.compute_client().shutdown()
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "the compute rank did not end after shutdown"
    assert not errors, errors


def _elements(dataset):
    return [int(x) for batch in dataset.as_numpy_iterator() for x in batch]


@pytest.mark.parametrize("reuse", [False, True])
def test_compute_side_dispatcher(shared_path, reuse):
    """One dispatcher in the compute job. Each rank's own job sees the whole dataset; one
    shared job (reuse_dataset) splits it across the ranks, every element once."""
    thread, errors = _start_compute(1, "compute", shared_path)
    config = TfDataServiceConfig.read(shared_path, wait_for_file_creation=True)
    assert stat.S_IMODE(os.stat(shared_path).st_mode) == 0o600  # it holds the key
    assert config.workers_per_dispatcher == hvd.size()
    try:
        dataset = tf.data.Dataset.range(64).batch(8).send_to_data_service(
            config, hvd.rank(), hvd.size(), reuse_dataset=reuse)
        got = hvd.allgather_object(_elements(dataset))
    finally:
        _finish(config, thread, errors)
    if reuse:
        assert sorted(x for mine in got for x in mine) == list(range(64))
    else:
        assert all(sorted(mine) == list(range(64)) for mine in got)


def test_training_side_dispatchers(shared_path):
    """Two dispatchers on the training side (a rank each, tf_data_service), each with its half of
    the compute ranks; parallel_epochs: every worker of the dispatcher sends the whole
    dataset. With an odd number of ranks the compute job refuses two dispatchers."""
    if hvd.size() % 2:
        thread, errors = _start_compute(2, "training", shared_path)
        thread.join(TIMEOUT)
        assert len(errors) == 1 and "multiple of number of dispatchers" in str(errors[0])
        return
    thread, errors = _start_compute(2, "training", shared_path)
    config = TfDataServiceConfig.read(shared_path, wait_for_file_creation=True)
    try:
        with pytest.raises(RuntimeError, match="training side dispatcher not supported"):
            tf.data.Dataset.range(4).send_to_data_service(config, hvd.rank())
        with tf_data_service(config, hvd.rank()) as address:
            dataset = tf.data.Dataset.range(16).batch(4).apply(
                tf.data.experimental.service.distribute("parallel_epochs", address))
            counts = Counter(_elements(dataset))
    finally:
        _finish(config, thread, errors)
    assert counts == Counter({x: config.workers_per_dispatcher for x in range(16)})


def test_config_round_trip(tmp_path):
    config = TfDataServiceConfig(2, 3, "compute", {"eth0": [("10.0.0.1", 4000)]},
                                 b"\x00\xffkey", 7)
    path = str(tmp_path / "c.json")
    config.write(path)
    assert TfDataServiceConfig.read(path) == config
    with pytest.raises(ValueError, match="dispatcher_side"):
        TfDataServiceConfig(1, 1, "elsewhere", {}, b"k")
    with pytest.raises(ValueError, match="rank 2 has no tf.data dispatcher: with 2"):
        with tf_data_service(config, 2):
            pass


def test_service_errors_name_what_is_missing():
    service = ComputeService(2, 2, key=b"right")
    try:
        config = TfDataServiceConfig(2, 2, "compute", service.addresses(), b"right")
        client = config.compute_client()
        with pytest.raises(RuntimeError, match="dispatcher 1 did not register within 0.2 s"):
            client.wait_for_dispatcher_registration(1, 0.2)
        with pytest.raises(RuntimeError, match="dispatcher id 5 is not one of the 2"):
            client.register_dispatcher(5, "grpc://x:1")
        client.register_dispatcher(1, "grpc://x:1")
        assert client.wait_for_dispatcher_registration(1, 0.2) == "grpc://x:1"
        client.register_worker_for_dispatcher(1, 0)
        with pytest.raises(RuntimeError, match="the 2 worker.s. of dispatcher 1 did not all"):
            client.wait_for_dispatcher_worker_registration(1, 0.2)
        forged = TfDataServiceConfig(2, 2, "compute", service.addresses(), b"wrong")
        with pytest.raises(ChannelError):
            forged.compute_client().shutdown()
        waiter = threading.Thread(target=client.wait_for_shutdown, daemon=True)
        waiter.start()
        client.shutdown()
        waiter.join(5)
        assert not waiter.is_alive()
    finally:
        service.shutdown()
