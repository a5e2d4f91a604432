"""Environments in processes, batching, the in-graph bridge, simulate, and the train loop's parts.

Names are imported on first use (PEP 562) so that environment worker processes,
which import `batchrl.tools.external_process`, never pay for importing TensorFlow.
"""

import importlib
import sys
import types

_EXPORTS = {
    "ExternalProcess": "batchrl.tools.external_process",
    "BatchEnv": "batchrl.tools.batch_env",
    "GroupedBatchEnv": "batchrl.tools.batch_env",
    "make_group": "batchrl.tools.batch_env",
    "InGraphEnv": "batchrl.tools.in_graph_env",
    "InGraphBatchEnv": "batchrl.tools.in_graph_batch_env",
    "simulate": "batchrl.tools.simulate",
    "MockEnvironment": "batchrl.tools.mock_environment",
    "MockAlgorithm": "batchrl.tools.mock_algorithm",
    "PolicyEvaluator": "batchrl.tools.policy_evaluator",
    "StreamingNormalizer": "batchrl.tools.normalizer",
    "RewardScaler": "batchrl.tools.normalizer",
    "VideoWriter": "batchrl.tools.video",
    "record_episode": "batchrl.tools.video",
    "Config": "batchrl.tools.config",
    "ConfigError": "batchrl.tools.config",
    "load_config": "batchrl.tools.config",
    "load_resolved_config": "batchrl.tools.config",
    "save_config": "batchrl.tools.config",
    "load_run_config": "batchrl.tools.run_config",
    "load_saved_run_config": "batchrl.tools.run_config",
    "Registry": "batchrl.tools.registry",
    "ALGORITHMS": "batchrl.tools.registry",
    "RUNNERS": "batchrl.tools.registry",
    "NETWORKS": "batchrl.tools.registry",
    "ENVIRONMENTS": "batchrl.tools.registry",
    "RolloutBuffer": "batchrl.tools.rollout_buffer",
    "EpisodeBuffer": "batchrl.tools.rollout_buffer",
    "learning_rate": "batchrl.tools.schedules",
    "Evaluation": "batchrl.tools.evaluation",
    "export_policy": "batchrl.tools.export",
    "Checkpoints": "batchrl.tools.checkpoints",
    "CheckpointError": "batchrl.tools.checkpoints",
    "make_batch_env": "batchrl.tools.environments",
    "make_in_graph_env": "batchrl.tools.environments",
    "make_env": "batchrl.tools.environments",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'batchrl.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__


class _Package(types.ModuleType):
    """This package, where importing `batchrl.tools.simulate` keeps `tools.simulate` the function.

    Python sets a submodule as an attribute of its package when it is first imported; for
    `simulate.py`, which holds `simulate`, that would replace the exported function.
    """

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == value.__name__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
