"""horovod.runner.common.util under the alias: only env."""
