"""horovod.runner.common under the alias: only util.env.get_env_rank_and_size."""
