"""The one actor group of the ray runner, the shapes built on it, and restarts' counting."""

import logging
import os
import time

import pytest

from batchrl.config import ConfigError, load_run_config
from batchrl.config.run_config import algorithm_class
from batchrl.runners.restarts import Restarts

pytest.importorskip("ray")

from batchrl.runners.ray import (  # noqa: E402
    SHAPES,
    ActorGroup,
    RayActorLearner,
    RayApex,
    RayPopulation,
    RayRunner,
    RaySamplers,
    RayTrainer,
    distribution,
)
from tests.runners.test_ray import wait_gone  # noqa: E402


def test_restarts_are_logged_until_the_limit_then_raise_naming_the_setting(caplog):
    caplog.set_level(logging.WARNING)
    restarts = Restarts(1, "actor", "threads.max_actor_restarts")
    restarts.count(3, "ValueError: bad step", ValueError("bad step"))
    assert "Actor 3 failed (ValueError: bad step); replacing it (restart 1 of at most 1)" in (
        caplog.text
    )
    match = r"Actor 0 failed, and actors have failed 2 times .* threads.max_actor_restarts=1"
    with pytest.raises(RuntimeError, match=match):
        restarts.count(0, "KeyError: 'x'", KeyError("x"))
    restarts.lose(2)
    assert restarts.restarts == 2 and restarts.lost == 2


@pytest.mark.parametrize(
    "preset, shape, runner",
    [
        ("cartpole_ppo_ray", "samplers", RaySamplers),
        ("debug_impala", "actor_learner", RayActorLearner),
        ("cartpole_apex_ray", "replay_shards", RayApex),
        ("cartpole_es", "evaluator_pool", RayPopulation),
    ],
)
def test_each_algorithm_gets_the_shape_it_needs(preset, shape, runner):
    config = load_run_config(preset, ["runner.name=ray", "env.id=CartPole-v1"])
    algo_cls = algorithm_class(config)
    assert distribution(algo_cls) == shape and SHAPES[shape] is runner
    RayTrainer.check_config(config, algo_cls)  # Accepted.


def test_a_declared_distribution_wins_and_an_unknown_one_is_refused():
    class Declared:
        distribution = "evaluator_pool"

    assert distribution(Declared) == "evaluator_pool"
    config = load_run_config("debug_impala", ["runner.name=ray", "env.id=CartPole-v1"])
    Declared.distribution = "everywhere"
    with pytest.raises(ConfigError, match="its distribution: 'everywhere'; known: samplers"):
        RayTrainer.check_config(config, Declared)


def test_a_runner_refuses_unknown_actor_options():
    with pytest.raises(TypeError, match=r"Unknown actor options \['cpus'\]; valid: cpus_per"):
        RayRunner(cpus=2)


def test_a_group_seeds_restarts_counts_what_was_lost_and_leaves_no_actor(ray_cluster, caplog):
    """Actor i starts from seed + stride i; its replacement from 100,000 more, and the
    failed call counts as lost work. `close` ends every actor's process."""
    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class Seeded:
        def __init__(self, seed):
            self.seed = seed

        def work(self):
            return self.seed, os.getpid()

    caplog.set_level(logging.WARNING)
    group = ActorGroup(
        Seeded, lambda index, seed: (seed,), 2, cpus_per_actor=0, seed=7, seed_stride=10
    )
    with group:
        results = group.gather(lambda index, handle: handle.work.remote(), "work")
        assert [seed for seed, _ in results] == [7, 17]
        victim = group.handles[1]
        ray.kill(victim, no_restart=True)
        time.sleep(1.0)
        results = group.gather(lambda index, handle: handle.work.remote(), "work after a kill")
        assert [seed for seed, _ in results] == [7, 100_017]
        assert group.restarts == 1 and group.lost == 1 and group.handles[1] is not victim
        assert "Ray actor 1 failed (" in caplog.text
        pids = [pid for _, pid in results]
    assert group.handles == []
    assert not wait_gone(pids)


def test_ape_x_starts_ray_with_cpus_for_its_replay_shards_too(monkeypatch):
    """breakout_minatar_apex_ray reserves 4 x 0.5 CPUs for its actors and 2 x 0.5 for its
    shards. A Ray started for it on 2 cores once had only the actors' 2: the shards were
    never placed, their adds never finished, and the run collected for its whole budget
    and learned nothing."""
    import ray

    import batchrl.runners.ray.trainer as trainer
    from batchrl.runners.ray import actors

    config = load_run_config("breakout_minatar_apex_ray")
    assert RayApex.cpus_needed(config) == 3.0
    samplers = load_run_config("cartpole_ppo_ray")  # Actors only.
    assert (
        RaySamplers.cpus_needed(samplers) == samplers.ray.num_actors * samplers.ray.cpus_per_actor
    )
    asked = []

    class Connected(Exception):
        pass

    def connect(cfg, cpus_needed):
        asked.append(cpus_needed)
        raise Connected

    monkeypatch.setattr(trainer, "connect", connect)
    algo_cls = algorithm_class(config)
    with pytest.raises(Connected):
        RayTrainer(config, algo_cls.__new__(algo_cls))
    assert asked == [3.0]
    started = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: started.append(kwargs["num_cpus"]))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert actors.connect(config.ray, 3.0) and started == [3]


def test_a_group_that_cannot_be_placed_fails_naming_it_instead_of_waiting(ray_cluster, monkeypatch):
    """Actors that reserve more CPUs than any node has are never built; the group says so
    after `timeout` seconds rather than leaving their calls waiting forever."""
    import ray

    from batchrl.runners.ray import group

    monkeypatch.setattr(group, "START_TIMEOUT", 0.0)  # Here `timeout` alone.

    @ray.remote(max_restarts=0)
    class Large:
        def work(self):
            return 1

    match = (
        r"No result from Ray replay shards 0, 1 for 2 s \(ray\.timeout\) while waiting "
        r"for their start; .* Each reserves 3 CPUs and the cluster has 4 in all"
    )
    with pytest.raises(TimeoutError, match=match):
        ActorGroup(
            Large, lambda index, seed: (), 2, cpus_per_actor=3, timeout=2, kind="replay shard"
        )
