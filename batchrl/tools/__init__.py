"""Environments in processes, batching, the in-graph bridge, simulate and helpers.

Names are imported on first use (PEP 562) so that environment worker processes,
which import `batchrl.tools.external_process`, never pay for importing TensorFlow.
"""

import importlib

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
