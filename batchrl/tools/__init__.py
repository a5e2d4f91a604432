"""The batching pipeline: environments in processes, batched, brought into the graph, stepped.

Data flows through these modules in this order: `ExternalProcess` runs one Gymnasium
environment in a process of its own (`external_process.py`, and the process's side,
`process_worker.py`); `BatchEnv` steps many of them
together (`batch_env.py`); `InGraphBatchEnv` puts a batch into the TensorFlow graph, or an
environment written in TensorFlow ops (`InGraphEnv`, `in_graph_env.py`) is one already;
`simulate` steps the batch and calls an algorithm's four methods (`simulate.py`);
`episodes.py` records each environment's first whole episode through it; and
`environments.py` builds all of this from a config's `env` section, Atari games with
TorchBeast's preprocessing from `atari.py` (or, with `env.engine: envpool`, a batch of
them in EnvPool's C++ thread pool: `envpool_batch_env.py`). What a training run
does around this (loop, checkpoints, evaluation) is in `batchrl.training`, the config in
`batchrl.config`, the learners' shared pieces in `batchrl.parts`. Nothing here imports
`batchrl.envs`: environment families register through `batchrl.config.GYMNASIUM_FAMILIES`
(the entry-point group batchrl.gymnasium_families).

This package imports nothing on its own: environment workers run
`batchrl.tools.process_worker` and must not load TensorFlow. Import names from their
modules, or from `batchrl` itself (`from batchrl import simulate, BatchEnv`).
"""
