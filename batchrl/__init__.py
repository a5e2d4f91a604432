"""batchrl: in-graph, batched reinforcement learning on TensorFlow 2.

The folders read as the data flow. `tools/` is the batching pipeline (environments in
processes, `BatchEnv`, `InGraphBatchEnv`, `simulate`); `envs/` holds environments written
in TensorFlow ops; `networks/` the networks; `parts/` what learners build from
(normalizers, buffers, schedules); `algorithms/` one folder per algorithm; `training/` the
loop, checkpoints, evaluation and export around an algorithm; `runners/` how a run's work
is spread (local, threads, Ray); `config/` the configs and the registry, with the YAML
presets in `configs/`; `testing/` fakes for tests; `scripts/` the command lines.
`core.py` declares the interfaces they meet at; `quiet.py` imports TensorFlow without
its C++ start-up log lines, for every process's entry point (scripts, Ray workers).

The names below load on first use, so that environment worker processes, which import
`batchrl.tools.external_process`, never import TensorFlow.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Algorithm": "batchrl.core",
    "Learner": "batchrl.core",
    "Policy": "batchrl.core",
    "Trainer": "batchrl.core",
    "ExternalProcess": "batchrl.tools.external_process",
    "BatchEnv": "batchrl.tools.batch_env",
    "EnvPoolBatchEnv": "batchrl.tools.envpool_batch_env",
    "InGraphEnv": "batchrl.tools.in_graph_env",
    "InGraphBatchEnv": "batchrl.tools.in_graph_batch_env",
    "simulate": "batchrl.tools.simulate",
    "make_env": "batchrl.tools.environments",
    "make_batch_env": "batchrl.tools.environments",
    "make_in_graph_env": "batchrl.tools.environments",
    "Config": "batchrl.config",
    "ConfigError": "batchrl.config",
    "load_config": "batchrl.config",
    "load_run_config": "batchrl.config",
    "train": "batchrl.runners.train",
    "MockEnvironment": "batchrl.testing.mock_environment",
    "MockAlgorithm": "batchrl.testing.mock_algorithm",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'batchrl' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
