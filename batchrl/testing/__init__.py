"""Fakes for tests, batchrl's and yours: an environment with known episodes, a checking algorithm.

`MockEnvironment` (registered as Gymnasium's `batchrl/Mock-v0`) has episode lengths and
rewards you can predict; `MockAlgorithm` acts at random and checks and counts every call
`simulate` makes. Names load on first use: environment workers import
`batchrl.testing.mock_environment` and must not load TensorFlow, which `MockAlgorithm` needs.
"""

import importlib

_MODULES = {
    "MockEnvironment": "batchrl.testing.mock_environment",
    "MockAlgorithm": "batchrl.testing.mock_algorithm",
}
__all__ = sorted(_MODULES)


def __getattr__(name):
    if name not in _MODULES:
        raise AttributeError(f"module 'batchrl.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)
