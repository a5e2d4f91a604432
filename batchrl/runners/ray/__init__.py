"""The ray runner: one actor group, and the runners on it (samplers, actor-learner, Ape-X, ES).

The only package that imports Ray; the registry imports it only for `runner.name: ray`.
"""

INSTALL_HINT = 'runner.name=ray needs Ray: pip install -e ".[ray]" (or pip install "ray==2.60.0").'
try:
    import ray  # noqa: F401
except ImportError as error:  # Reported at config load, where the registry resolves us.
    raise ImportError(INSTALL_HINT) from error

from batchrl.runners.ray.actors import EnvActor, connect  # noqa: E402
from batchrl.runners.ray.apex import RayApex  # noqa: E402
from batchrl.runners.ray.apex_actor import ApexActor, epsilons  # noqa: E402
from batchrl.runners.ray.dynamic_batcher import RayDynamicBatcher  # noqa: E402
from batchrl.runners.ray.group import ActorGroup, ActorOptions, RayRunner  # noqa: E402
from batchrl.runners.ray.impala import RayActorLearner, make_behaviour_policy  # noqa: E402
from batchrl.runners.ray.population import (  # noqa: E402
    PopulationWorker,
    RayPopulation,
    merge_statistics,
)
from batchrl.runners.ray.replay_shards import ReplayShard  # noqa: E402
from batchrl.runners.ray.samplers import RaySamplers, Sampler  # noqa: E402
from batchrl.runners.ray.trainer import SHAPES, RayTrainer, distribution  # noqa: E402

__all__ = [
    "INSTALL_HINT",
    "SHAPES",
    "ActorGroup",
    "ActorOptions",
    "ApexActor",
    "EnvActor",
    "PopulationWorker",
    "RayActorLearner",
    "RayApex",
    "RayDynamicBatcher",
    "RayPopulation",
    "RayRunner",
    "RaySamplers",
    "ReplayShard",
    "RayTrainer",
    "Sampler",
    "connect",
    "distribution",
    "epsilons",
    "make_behaviour_policy",
    "merge_statistics",
]
