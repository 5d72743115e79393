"""horovod.runner.util under the alias: only threads.in_thread."""
