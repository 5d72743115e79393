"""Horovod's tf.data service integration (horovod.tensorflow.data): a compute job of tf.data
dispatchers and workers that training jobs send their input pipelines to.

    hvdsparse run -np 4 python -m hvdsparse.tensorflow.data.compute_worker /shared/compute.json
    # in the training job:
    config = TfDataServiceConfig.read("/shared/compute.json", wait_for_file_creation=True)
    dataset = dataset.send_to_data_service(config, hvd.rank(), hvd.size())

compute_service.py: the config, the training side and the compute side; compute_worker.py: the
compute job's main.
"""
