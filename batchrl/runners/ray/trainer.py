"""Runner `ray`: `RayTrainer`, which a config's `runner.name: ray` chooses."""

from __future__ import annotations

import functools

import ray

from batchrl.config import ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.config.run_config import algorithm_class, algorithm_section
from batchrl.core import Learner, RolloutLearner, Trainer
from batchrl.runners.ray.actors import connect
from batchrl.runners.ray.apex import RayApex
from batchrl.runners.ray.apex_actor import acting_config
from batchrl.runners.ray.impala import INFERENCE, RayActorLearner, make_behaviour_policy
from batchrl.runners.ray.population import RayPopulation
from batchrl.runners.ray.samplers import RaySamplers
from batchrl.tools.environments import EnvSpaces, make_batch_env, make_in_graph_env


def _is_population(algo_cls) -> bool:
    return hasattr(algo_cls, "evaluate_members") and hasattr(algo_cls, "make_evaluator")


def _has_behaviour_policy(algo_cls) -> bool:
    return getattr(algo_cls, "make_behaviour_policy", None) not in (
        None,
        Learner.make_behaviour_policy,
    )


def _is_off_policy(algo_cls) -> bool:
    # Imported here: the algorithms load only with the config that names them.
    from batchrl.algorithms.off_policy import OffPolicy

    return issubclass(algo_cls, OffPolicy)


class RayTrainer(Trainer):
    """Runner `ray`: IMPALA's actors (`RayActorLearner`), PPO's samplers (`RaySamplers`),
    ES's workers (`RayPopulation`) or DQN as Ape-X (`RayApex`: actors and replay shards).

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
        if cfg.inference == "dynamic" and cfg.inference_batch > cfg.num_actors:
            raise ConfigError(
                f"Invalid ray.inference_batch={cfg.inference_batch}: a forward pass serves "
                f"at most the ray.num_actors={cfg.num_actors} actors; use 1 to "
                f"{cfg.num_actors}, or 0 for all."
            )
        address = cfg.address
        host, _, port = address.rpartition(":")
        if address not in ("", "auto") and not (host and port.isdigit()):
            raise ConfigError(
                f"Invalid ray.address={address!r}; it must be empty (start Ray on this "
                "machine), 'auto' (the cluster this machine's `ray start` joined) or "
                "host:port of a cluster's head (e.g. 10.0.0.1:6379)."
            )
        name = config.algorithm.name
        if _is_population(algo_cls):
            pairs = config[algorithm_section(config)].population
            if cfg.num_actors > pairs:
                raise ConfigError(
                    f"Invalid ray.num_actors={cfg.num_actors}; ES's {pairs} mirrored pairs "
                    f"give work to at most {pairs} workers (a member and its mirror are "
                    f"evaluated by one worker): use 1 to {pairs}."
                )
            return
        section = algorithm_section(config)
        if issubclass(algo_cls, RolloutLearner):
            if config[section].get("update_mode", "steps") != "steps":
                raise ConfigError(
                    f"runner.name='ray' collects rollouts of {section}.rollout_length steps in "
                    f"sampler actors; {section}.update_mode="
                    f"{config[section].update_mode!r} (updates after finished episodes) has "
                    f"no Ray path. Use {section}.update_mode='steps' or runner.name='local'."
                )
        elif _is_off_policy(algo_cls):
            if section != "dqn":
                raise ConfigError(
                    f"algorithm.name={name!r} is off-policy, and runner.name='ray' runs only "
                    "DQN's off-policy path (Ape-X: epsilon-greedy actors feeding prioritized "
                    "replay shards); SAC's and TD3's actors would need their continuous-action "
                    "policies there, which are not written. Use runner.name='local'."
                )
            cls._check_apex(config)
            return
        elif not _has_behaviour_policy(algo_cls):
            raise ConfigError(
                f"runner.name='ray' runs an algorithm with a behaviour policy for its actors "
                f"(a Learner, as impala), rollouts for sampler actors (a RolloutLearner, as "
                f"ppo) or a population (es); algorithm.name={name!r} is none of these. Use "
                "runner.name='local'."
            )
        length = "rollout_length" if issubclass(algo_cls, RolloutLearner) else "unroll_length"
        if length not in config[section]:
            raise ConfigError(
                f"runner.name='ray' reads {length} from the {section!r} section, which has none."
            )
        if config.env.backend != "gymnasium" or config.train.jit_compile:
            raise ConfigError(
                "runner.name='ray' steps Gymnasium environments in Ray actors for "
                f"{name!r}: it needs env.backend='gymnasium' and train.jit_compile=false."
            )

    @classmethod
    def _check_apex(cls, config) -> None:
        apex, dqn = config.apex, config.dqn
        check_range(
            apex,
            "apex",
            {
                "num_shards": (lambda x: x >= 1, ">= 1"),
                "buffer_size": (lambda x: x >= 1, ">= 1"),
                "cpus_per_shard": (lambda x: x > 0, "> 0"),
                "epsilon": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "epsilon_alpha": (lambda x: x >= 0, ">= 0"),
                "block_length": (lambda x: x >= 1, ">= 1 (batched steps)"),
                "weights_every": (lambda x: x >= 1, ">= 1 (updates)"),
                "requests_per_shard": (lambda x: x >= 1, ">= 1"),
                "steps_per_update": (lambda x: x >= 0, ">= 0 (0: actors run free)"),
            },
        )
        if apex.buffer_size // apex.num_shards < dqn.batch_size:
            raise ConfigError(
                f"apex.buffer_size={apex.buffer_size} gives each of apex.num_shards="
                f"{apex.num_shards} shards fewer transitions than dqn.batch_size="
                f"{dqn.batch_size}, the batch one shard samples."
            )
        if dqn.learning_starts > apex.buffer_size:
            raise ConfigError(
                f"dqn.learning_starts={dqn.learning_starts} is more than apex.buffer_size="
                f"{apex.buffer_size}: the shards never hold that many transitions, so "
                "learning would never start. Valid: at most apex.buffer_size."
            )
        if config.env.backend != "gymnasium" or config.train.jit_compile:
            raise ConfigError(
                "runner.name='ray' steps Gymnasium environments in Ray actors for 'dqn': it "
                "needs env.backend='gymnasium' and train.jit_compile=false."
            )

    @classmethod
    def algorithm_config(cls, config):
        """The config the learner is built with: Ape-X's learner samples from the shards,
        so its own replay buffer is the least its checks allow (`acting_config`)."""
        if _is_off_policy(algorithm_class(config)):
            return acting_config(config)
        return config

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """What the algorithm is built with here; the actors step environments of their own.

        IMPALA gets the spaces only; PPO the spaces and the size of its learner batch, the
        environments of all actors (`ray.num_actors` x `env.num_envs`). ES gets its own
        training environments when they are
        TensorFlow ops (cheap, and their state is checkpointed, so a run can resume with
        another runner); with Gymnasium's it gets one environment, for the spaces.
        """
        algo_cls = algorithm_class(config)
        if issubclass(algo_cls, RolloutLearner):
            return EnvSpaces(config.env, config.ray.num_actors * config.env.num_envs)
        if not _is_population(algo_cls):
            return EnvSpaces(config.env, config.env.num_envs)
        if config.env.backend == "tensorflow":
            return algo_cls.make_batch_env(config, seed)
        return make_in_graph_env(config.env, 1, seed)

    def __init__(self, config, algo, batch_env=None, seed: int = 0):
        del batch_env  # The actors build their own.
        cfg = config.ray
        self._runner = None
        self._connected = connect(cfg, cfg.num_actors * cfg.cpus_per_actor)
        common = dict(
            cpus_per_actor=cfg.cpus_per_actor,
            tf_threads=cfg.tf_threads,
            max_actor_restarts=cfg.max_actor_restarts,
            timeout=cfg.timeout,
        )
        try:
            section = config[algorithm_section(config)]
            if _is_population(type(algo)):
                self._runner = RayPopulation(
                    config,
                    algo,
                    cfg.num_actors,
                    seed=config.train.seed,
                    streams_seed=seed,
                    **common,
                )
            elif _is_off_policy(type(algo)):
                self._runner = RayApex(config, algo, cfg.num_actors, seed=seed, **common)
            elif isinstance(algo, RolloutLearner):
                self._runner = RaySamplers(
                    config,
                    algo,
                    cfg.num_actors,
                    section.rollout_length,
                    updates_per_step=config.train.steps_per_call // section.rollout_length,
                    seed=seed,
                    **common,
                )
            else:
                self._runner = RayActorLearner(
                    functools.partial(make_batch_env, config.env, config.env.num_envs),
                    functools.partial(make_behaviour_policy, config),
                    algo,
                    num_actors=cfg.num_actors,
                    unroll_length=section.unroll_length,
                    learner_batch=cfg.learner_batch,
                    requests_per_actor=cfg.requests_per_actor,
                    inference=cfg.inference,
                    max_batch=cfg.inference_batch,
                    batch_timeout=cfg.inference_timeout,
                    seed=seed,
                    **common,
                )
        except BaseException:
            self.close()
            raise

    @property
    def runner(self) -> RayActorLearner | RayApex | RayPopulation | RaySamplers:
        return self._runner

    def step(self) -> tuple[int, dict]:
        if isinstance(self._runner, RayActorLearner):
            return self._runner.update()
        return self._runner.step()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._connected:
            ray.shutdown()
            self._connected = False
