"""Runner `ray`: `RayTrainer`, which a config's `runner.name: ray` chooses."""

from __future__ import annotations

import ray

from batchrl.config import ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.config.run_config import algorithm_class
from batchrl.core import Learner, RolloutLearner, Trainer
from batchrl.runners.ray.actors import connect
from batchrl.runners.ray.apex import RayApex
from batchrl.runners.ray.group import RayRunner
from batchrl.runners.ray.impala import INFERENCE, RayActorLearner
from batchrl.runners.ray.population import RayPopulation
from batchrl.runners.ray.samplers import RaySamplers

# The shapes of distribution an algorithm may need, and the runner that gives each.
SHAPES: dict[str, type[RayRunner]] = {
    "samplers": RaySamplers,  # Sampler actors feed one on-policy learner (PPO).
    "actor_learner": RayActorLearner,  # Actors with policy copies, and lag (IMPALA).
    "replay_shards": RayApex,  # Actors feeding replay shards, one learner (DQN as Ape-X).
    "evaluator_pool": RayPopulation,  # Workers evaluate slices of a population (ES).
}


def distribution(algo_cls) -> str | None:
    """The shape of distribution (a key of `SHAPES`) that `algo_cls` needs on Ray.

    An algorithm says so in its `distribution` attribute; for one that does not, it is
    read from the interfaces it implements. None: it has no Ray path.
    """
    declared = getattr(algo_cls, "distribution", None)
    if declared is not None:
        return declared
    # Imported here: the algorithms load only with the config that names them.
    from batchrl.algorithms.off_policy import OffPolicy

    if hasattr(algo_cls, "evaluate_members") and hasattr(algo_cls, "make_evaluator"):
        return "evaluator_pool"
    if issubclass(algo_cls, OffPolicy):
        return "replay_shards"
    if issubclass(algo_cls, RolloutLearner):
        return "samplers"
    if getattr(algo_cls, "make_behaviour_policy", None) not in (
        None,
        Learner.make_behaviour_policy,
    ):
        return "actor_learner"
    return None


class RayTrainer(Trainer):
    """Runner `ray`: the `RayRunner` of the shape of distribution the algorithm needs
    (`distribution`, `SHAPES`): PPO's samplers (`RaySamplers`), IMPALA's actors
    (`RayActorLearner`), DQN as Ape-X (`RayApex`: actors and replay shards) or ES's
    workers (`RayPopulation`). It asks that runner to check the config, build the
    algorithm's environments and start (`check_config`, `make_batch_env`, `from_config`).

    Reads the `ray` section. It starts Ray on this machine for the run when `ray.address`
    is empty (and stops it at `close`), or joins the cluster at `ray.address`; in a
    process already connected to Ray it uses that connection. Every `step` is one
    learner update (IMPALA, Ape-X), the updates of a local training call (PPO:
    `train.steps_per_call` / T) or one generation (ES). The algorithm, its checkpoints and
    evaluation stay in this process, so checkpoints and resume are those of the other
    runners.
    """

    # The train script takes this runner's environments and trainer even for an algorithm
    # that brings its own (ES): spreading its work is what this runner is for.
    runs_algorithm_work = True

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError when the `ray` section or the algorithm cannot run on Ray."""
        cfg = config.ray
        check_choice("ray.inference", cfg.inference, INFERENCE)
        check_range(
            cfg,
            "ray",
            {
                "num_actors": (lambda x: x >= 1, ">= 1"),
                "cpus_per_actor": (lambda x: x > 0, "> 0"),
                "tf_threads": (lambda x: x >= 1, ">= 1"),
                "learner_batch": (lambda x: x >= 1, ">= 1"),
                "requests_per_actor": (lambda x: x in (1, 2), "1 or 2"),
                "max_actor_restarts": (lambda x: x >= 0, ">= 0"),
                "timeout": (lambda x: x > 0, "> 0 seconds"),
                "inference_batch": (lambda x: x >= 0, ">= 0 (0: all actors)"),
                "inference_timeout": (lambda x: x >= 0, ">= 0 seconds"),
            },
        )
        address = cfg.address
        host, _, port = address.rpartition(":")
        if address not in ("", "auto") and not (host and port.isdigit()):
            raise ConfigError(
                f"Invalid ray.address={address!r}; it must be empty (start Ray on this "
                "machine), 'auto' (the cluster this machine's `ray start` joined) or "
                "host:port of a cluster's head (e.g. 10.0.0.1:6379)."
            )
        shape = distribution(algo_cls)
        if shape not in SHAPES:
            raise ConfigError(
                f"runner.name='ray' runs an algorithm with a behaviour policy for its actors "
                f"(a Learner, as impala), rollouts for sampler actors (a RolloutLearner, as "
                f"ppo), a population (es) or replay (dqn); algorithm.name="
                f"{config.algorithm.name!r} is none of these (its distribution: {shape!r}; "
                f"known: {', '.join(SHAPES)}). Use runner.name='local'."
            )
        SHAPES[shape].check_config(config, algo_cls)

    @classmethod
    def algorithm_config(cls, config):
        """The config the learner is built with (Ape-X's keeps no replay of its own)."""
        return cls._shape(algorithm_class(config)).algorithm_config(config)

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """What the algorithm is built with here; the actors step environments of their own.

        IMPALA and DQN get the spaces only; PPO the spaces and the size of its learner
        batch, the environments of all actors (`ray.num_actors` x `env.num_envs`). ES gets
        its own training environments when they are TensorFlow ops, else one for the spaces.
        """
        return cls._shape(algorithm_class(config)).make_batch_env(config, seed)

    @staticmethod
    def _shape(algo_cls) -> type[RayRunner]:
        return SHAPES[distribution(algo_cls)]

    def __init__(self, config, algo, batch_env=None, seed: int = 0):
        del batch_env  # The actors build their own.
        cfg = config.ray
        self._runner = None
        shape = self._shape(type(algo))
        self._connected = connect(cfg, shape.cpus_needed(config))
        try:
            self._runner = shape.from_config(config, algo, seed)
        except BaseException:
            self.close()
            raise

    @property
    def runner(self) -> RayRunner:
        return self._runner

    def step(self) -> tuple[int, dict]:
        return self._runner.step()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._connected:
            ray.shutdown()
            self._connected = False
