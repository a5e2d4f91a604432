"""The ray runner on a real two-node loopback cluster: IMPALA actors, ES workers, faults."""

import functools
import logging
import re
import signal
import sys
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
import tensorflow as tf

from batchrl.algorithms import IMPALA
from batchrl.algorithms.es import ES, GenerationTrainer
from batchrl.config import ConfigError, load_run_config
from batchrl.core import BehaviourPolicy
from batchrl.quiet import is_tensorflow_log_line
from batchrl.runners import train
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import EnvSpaces, make_batch_env
from tests.algorithms.es.test_es import SMALL, FixedStartCartPole
from tests.scripts.test_train import TRAIN_IN_PROCESSES, run_script, wait_for_progress

pytest.importorskip("ray")

from batchrl.runners.ray import (  # noqa: E402
    RayActorLearner,
    RayPopulation,
    make_behaviour_policy,
    merge_statistics,
)

# The processes of every IMPALA actor the tests saw, checked to be gone after close.
SEEN = set()


def quiet(*_, **__):
    pass


# The bound on every wait for a Ray actor in these tests: a guard against hangs, generous
# because under -n auto the tests beside share the cores (an XLA compile on a loaded core
# has taken over 180 s).
RAY_TIMEOUT = 600


def wait_gone(pids, seconds=60.0):
    """The `pids` still alive after up to `seconds` (generous: under -n auto the tests
    beside share the cores)."""
    deadline = time.monotonic() + seconds
    while [pid for pid in pids if psutil.pid_exists(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    return [pid for pid in pids if psutil.pid_exists(pid)]


def actor_info(handles):
    import ray

    pids = ray.get([handle.pid.remote() for handle in handles], timeout=300)
    nodes = ray.get([handle.node_id.remote() for handle in handles], timeout=300)
    if hasattr(handles[0], "env_pids"):  # Environment workers count as the actor's.
        for workers in ray.get([handle.env_pids.remote() for handle in handles], timeout=300):
            SEEN.update(workers)
    return pids, nodes


def test_es_workers_give_the_parameters_of_single_process_es(ray_cluster):
    """Two workers on two nodes, 3 generations: theta and Adam's moments are exactly those of
    `GenerationTrainer` in this process for the same seed and population.

    FixedStartCartPole, so that the members' episodes do not depend on which environments
    run them; no observation statistics, which a generation in one batch also gathers
    from environments whose first episode ended while others still run.

    It runs before the IMPALA tests, whose module-wide actors (and the node they remove
    and add again) would leave the nodes' free CPUs uneven, so that SPREAD could not put
    one worker on each node: in one CI run both landed on the same node."""
    overrides = [*SMALL, "runner.name=ray", "ray.num_actors=2", "es.normalize_observ=false"]
    config = load_run_config("cartpole_es", overrides)
    local = ES(FixedStartCartPole(16), config, seed=0)
    trainer = GenerationTrainer(config, local, FixedStartCartPole(16))
    remote = ES(FixedStartCartPole(1), config, seed=0)
    with RayPopulation(
        config, remote, 2, make_env=fixed_start_env, timeout=RAY_TIMEOUT
    ) as population:
        assert population.slices == [(0, 2), (2, 4)]  # Pairs: members 0, 1, 4, 5 and 2, 3, 6, 7.
        _, nodes = actor_info(population.actors)
        assert len(set(nodes)) == 2
        pids, _ = actor_info(population.actors)
        for _ in range(3):
            local_steps, local_stats = trainer.step()
            steps, stats = population.step()
            assert steps == local_steps
            assert stats["mean_return"] == pytest.approx(float(local_stats["mean_return"]))
            # The parts of the generation, as bench/routing_workers.py reads them.
            timing = population.timing
            assert len(timing["workers"]) == 2 and min(timing["workers"]) > 0
            assert timing["communication"] == pytest.approx(
                timing["gather"] - max(timing["workers"])
            )
            assert timing["communication"] >= 0 and timing["update"] > 0
    assert int(remote.strategy.generation) == 3
    for name in ("theta", "m", "v"):
        np.testing.assert_array_equal(
            getattr(remote.strategy, name).numpy(), getattr(local.strategy, name).numpy()
        )
    assert not wait_gone(pids)


@pytest.mark.parametrize(
    "preset, jit_compile",
    [
        ("nsfnet_es", False),
        pytest.param("nsfnet_es", True, marks=pytest.mark.slow),
        # NSFNET and GEANT2 in one batch: episode e of a member on e mod 2. Slow: 25 s.
        pytest.param("mixed_es", False, marks=pytest.mark.slow),
    ],
)
def test_routing_es_with_common_random_numbers_on_ray_gives_the_local_parameters(
    ray_cluster, preset, jit_compile
):
    """nsfnet_es (and mixed_es) with common random numbers, shrunk (4 pairs, E = 2, H =
    R = 8, T = 2), on two workers of two pairs each: after 3 generations theta and
    Adam's moments are exactly those of `GenerationTrainer` in this process, for the
    same seed and streams seed, in graph mode and (slow) under XLA as the preset runs.
    Each worker's environments play on the streams they have in the local batch from
    that generation's seed; neither the workers' own environment seeds nor `train.seed`
    (0, not the streams seed 7) decide the demands. Raw fitness (not the preset's
    ranks), so that theta depends on every member's return, not only on their order."""
    overrides = [
        "es.population=4",
        "es.episodes_per_member=2",
        "network.link_state_size=8",
        "network.readout_units=8",
        "network.message_passing_steps=2",
        "es.fitness_shaping=raw",
        f"train.jit_compile={str(jit_compile).lower()}",
        "runner.name=ray",
        "ray.num_actors=2",
    ]
    if preset == "mixed_es":  # Workers draw action noise of their own: none here.
        overrides += ["es.action_noise=0.0", "es.common_action_noise=false"]
    config = load_run_config(preset, overrides)
    assert config.es.common_random_numbers
    local = ES(ES.make_batch_env(config, 0), config, seed=0)
    trainer = GenerationTrainer(config, local, ES.make_batch_env(config, 0), seed=7)
    remote = ES(ES.make_batch_env(config, 0), config, seed=0)
    with RayPopulation(config, remote, 2, streams_seed=7, timeout=RAY_TIMEOUT) as population:
        assert population.slices == [(0, 2), (2, 4)]
        for _ in range(3):
            local_steps, local_stats = trainer.step()
            steps, stats = population.step()
            assert steps == local_steps
            # A weighted mean of the workers' means, in float64: equal up to rounding.
            assert stats["mean_return"] == pytest.approx(float(local_stats["mean_return"]))
        pids, _ = actor_info(population.actors)
    assert int(remote.strategy.generation) == 3
    for name in ("theta", "m", "v"):
        np.testing.assert_array_equal(
            getattr(remote.strategy, name).numpy(), getattr(local.strategy, name).numpy()
        )
    assert not np.array_equal(remote.strategy.theta.numpy(), remote.network.init_params(0))
    assert not wait_gone(pids)


# One generation of 256 routing episodes and 300 evaluation ones, XLA. GEANT2's (241 s in the
# slow stage on an AMD EPYC of family 25, 2026-12-02, against 123 s for NSFNET) runs the same
# code on a larger graph, outside CI for its time limit.
@pytest.mark.parametrize(
    "preset",
    [
        pytest.param("nsfnet_es", marks=pytest.mark.slow),
        pytest.param("geant2_es", marks=pytest.mark.long),
    ],
)
def test_the_routing_presets_train_on_ray_unchanged(ray_cluster, tmp_path, preset):
    """The routing ES presets, common random numbers and all, with runner.name=ray and
    only their length cut to one generation: two workers, the final evaluation."""
    overrides = ["runner.name=ray", "train.total_steps=1"]
    config = load_run_config(preset, overrides)
    assert config.es.common_random_numbers and config.ray.num_actors == 2
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] > 0 and np.isfinite(result["eval_return"])


def impala_runner(overrides, **kwargs):
    """debug_impala on CartPole (B=2, T=16) with runner ray and `overrides`, and a
    `RayActorLearner` of it with `kwargs` (2 actors unless they say otherwise)."""
    config = load_run_config("debug_impala", ["env.id=CartPole-v1", "runner.name=ray", *overrides])
    algo = IMPALA(EnvSpaces(config.env, config.env.num_envs), config)
    runner = RayActorLearner(
        functools.partial(make_batch_env, config.env, config.env.num_envs),
        functools.partial(make_behaviour_policy, config),
        algo,
        **{"num_actors": 2, "unroll_length": 16, "timeout": RAY_TIMEOUT, **kwargs},
    )
    return algo, runner


@pytest.fixture(scope="module")
def impala(ray_cluster):
    """IMPALA on CartPole with 2 Ray actors of 2 environments in worker processes, T=16."""
    _, runner = impala_runner(
        ["env.processes=true", "ray.num_actors=2"], learner_batch=2, requests_per_actor=2
    )
    with runner:
        yield runner
    assert SEEN
    assert not wait_gone(SEEN), "actor processes outlived close()"


def update(runner):
    return runner.update()


def test_impala_actors_on_two_nodes_train_and_record_policy_lag(impala):
    pids, nodes = actor_info(impala.actors)
    SEEN.update(pids)
    assert len(SEEN) == 2 + 4  # Two actors, two environment workers each.
    assert len(set(nodes)) == 2  # SPREAD put one actor on each node.
    lags = []
    for _ in range(4):
        steps, stats = update(impala)
        assert steps == 2 * 16 * 2  # learner_batch unrolls of T=16 x B=2.
        lags.append(stats["policy_lag"])
    assert impala.version == 4
    assert lags[0] == 0.0  # The first unrolls acted with the initial weights.
    # Two requests in flight: the second carries the weights of the version before.
    assert max(lags) >= 0.5, lags


def test_removing_a_node_replaces_its_actor(impala, ray_cluster, caplog):
    caplog.set_level(logging.WARNING)
    pids, nodes = actor_info(impala.actors)
    SEEN.update(pids)
    worker_node = ray_cluster.worker.node_id
    lost = [index for index, node in enumerate(nodes) if node == worker_node]
    assert len(lost) == 1, nodes
    restarts = impala.restarts
    ray_cluster.cluster.remove_node(ray_cluster.worker)
    try:
        for _ in range(100):
            update(impala)
            if impala.restarts > restarts:
                break
        assert impala.restarts == restarts + 1
        assert f"Ray actor {lost[0]} failed" in caplog.text
        for _ in range(2):
            update(impala)
        new_pids, new_nodes = actor_info(impala.actors)
        SEEN.update(new_pids)
        assert worker_node not in new_nodes
    finally:  # The tests after this one want two nodes again.
        ray_cluster.worker = ray_cluster.cluster.add_node(num_cpus=2)
        ray_cluster.cluster.wait_for_nodes()


def test_a_killed_actor_is_logged_and_replaced(impala, caplog):
    import ray

    caplog.set_level(logging.WARNING)
    victim = impala.actors[0]
    (pid,), _ = actor_info([victim])
    workers = ray.get(victim.env_pids.remote(), timeout=60)
    assert len(workers) == 2
    restarts = impala.restarts
    ray.kill(victim, no_restart=True)
    for _ in range(20):
        update(impala)
        if impala.restarts > restarts:
            break
    assert impala.restarts == restarts + 1
    assert impala.actors[0] is not victim
    assert "Ray actor 0 failed (ActorDiedError" in caplog.text
    for _ in range(2):  # Training carries on with the new actor.
        update(impala)
    new_pids, _ = actor_info(impala.actors)
    SEEN.update(new_pids)
    assert pid not in new_pids
    assert not wait_gone([pid, *workers])  # Its environment workers exited with it.


def fixed_start_env(config, size, seed):
    del config, seed
    return FixedStartCartPole(size)


def test_merge_statistics_equals_the_statistics_of_all_observations():
    """Worker k started from the statistics of `base` and added its own batch."""
    rng = np.random.default_rng(0)
    base, *batches = [rng.normal(k, 1 + k, size=(n, 3)) for k, n in enumerate((5, 7, 4))]

    def stats(values):  # (count, M2, mean), the order of StreamingNormalizer.variables.
        return [np.asarray(float(len(values))), values.var(0) * len(values), values.mean(0)]

    merged = merge_statistics(stats(base), [stats(np.concatenate([base, b])) for b in batches])
    for got, want in zip(merged, stats(np.concatenate([base, *batches]))):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_without_ray_the_config_fails_at_load_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError.
    monkeypatch.delitem(sys.modules, "batchrl.runners.ray", raising=False)
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[ray\]"'):
        load_run_config("debug_impala", ["runner.name=ray"])


@pytest.mark.slow  # Two runs, each starting an actor: 15 to 30 s.
def test_train_on_ray_records_lag_checkpoints_and_resumes(ray_cluster, tmp_path, event_tags):
    """The train script with runner ray (one actor): summaries, a checkpoint, a resume."""
    overrides = [
        "env.id=CartPole-v1",
        "runner.name=ray",
        "ray.num_actors=1",
        "train.eval_every=0",
        "train.checkpoint_every=64",
    ]
    config = load_run_config("debug_impala", [*overrides, "train.total_steps=128"])
    assert train(config, tmp_path, progress=quiet)["step"] == 128  # 2 updates of 2 x 16 x 2.
    assert {"impala/policy_lag", "impala/actor_restarts"} <= event_tags(tmp_path / "train")
    messages = []
    config = load_run_config("debug_impala", [*overrides, "train.total_steps=256"])
    result = train(config, tmp_path, progress=lambda text, **_: messages.append(text))
    assert result["step"] == 256
    assert any("Resumed from" in text and "at step 128" in text for text in messages), messages


@pytest.mark.slow
def test_ctrl_c_on_a_ray_run_saves_and_leaves_no_process(tmp_path):
    """A run that starts its own Ray (ray.address empty) and 2 actors with environment
    workers: SIGINT saves a checkpoint, and every process under it (Ray's raylet, GCS,
    actors, their environment workers) is gone soon after."""
    logdir = tmp_path / "run"
    code = TRAIN_IN_PROCESSES.format(
        logdir=str(logdir),
        extra=["runner.name=ray", "ray.num_actors=2", "ray.cpus_per_actor=0.5"],
        preset="debug_impala",
    )
    process = run_script(tmp_path, code)
    try:
        wait_for_progress(process, 3)
        children = [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
        assert len(children) >= 2 + 2 * 2  # Ray's own, 2 actors, 2 workers each.
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 130, output
    assert "SIGINT: saved a checkpoint" in output
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")) is not None
    assert not wait_gone(children, 30), "processes of the run outlived it"
    # The workers import TensorFlow quietly (actors.RUNTIME_ENV): none of its C++ start-up
    # lines reach the driver, which Ray prints as "(EnvActor pid=...) I0000 ...".
    from_workers = [
        re.sub(r"\x1b\[[\d;]*m", "", line).split(") ", 1)
        for line in output.splitlines()
        if "pid=" in line
    ]
    noise = [p for p in from_workers if len(p) == 2 and is_tensorflow_log_line(p[1])]
    assert not noise, output


@pytest.mark.slow  # Two more actors to start: 15 to 30 s.
def test_central_inference_acts_for_all_actors_with_the_newest_weights(ray_cluster):
    """ray.inference=central, lockstep dynamic batching: every update learns from T steps
    of all actors' environments, each forward pass serves both actors, and all steps are
    acted on in this process with the weights of that update (lag 0)."""
    _, runner = impala_runner(["ray.inference=central"], inference="central")
    with runner:
        pids, _ = actor_info(runner.actors)
        episodes = 0
        for _ in range(3):
            steps, stats = runner.update()
            assert steps == 16 * 2 * 2  # T x (2 actors x B=2).
            assert stats["policy_lag"] == 0.0
            episodes += stats["episodes"]
        assert runner.version == 3
        assert runner.batcher.batch_sizes == [2] * 3 * 16
        assert episodes >= 1  # Episodes end and are counted (CartPole's, of the initial policy).
    assert not wait_gone(pids)


def test_an_error_in_the_actors_code_is_logged_in_full_and_stops_when_it_repeats(
    ray_cluster, caplog
):
    """The first failure logs the remote traceback; the same from the replacement stops."""
    import ray

    from batchrl.runners.ray.group import ActorGroup

    @ray.remote(num_cpus=0, max_restarts=0)
    class Buggy:
        def work(self):
            return {}["missing key"]

    def fail(actors):
        handle = actors.handles[0]
        with pytest.raises(ray.exceptions.RayTaskError) as raised:
            ray.get(handle.work.remote(), timeout=60)
        return handle, raised.value

    caplog.set_level(logging.WARNING)
    actors = ActorGroup(
        Buggy, lambda index, seed: (), 1, cpus_per_actor=0, max_actor_restarts=10, timeout=60
    )
    try:
        assert actors.replace(0, *fail(actors))
        assert "Ray actor 0 failed (KeyError: 'missing key'); replacing it" in caplog.text
        assert 'in work\n    return {}["missing key"]' in caplog.text  # The remote traceback.
        with pytest.raises(RuntimeError, match="Ray actor 0, a replacement, raised KeyError"):
            actors.replace(0, *fail(actors))
        assert actors.restarts == 1  # Not replaced again, and not ray.max_actor_restarts=10.
        assert actors.lost == 2  # Both failed calls' work.
    finally:
        actors.close()


@pytest.mark.slow  # One more actor to start: 10 to 20 s.
@pytest.mark.parametrize(
    "inference, inputs",
    [
        ("actor", ""),
        ("dynamic", ""),
        ("dynamic", "last_action"),
        ("dynamic", "last_action, last_reward"),
    ],
)
def test_impala_with_an_lstm_core_carries_its_state_on_ray(ray_cluster, inference, inputs):
    """network.core=lstm on Ray actors: the actors' `UnrollCollector` (actor inference) or
    the learner's batcher (dynamic) carries the core state, unrolls bring the state they
    started from, the learner learns from them. With `network.core_inputs:
    [last_action]` the state holds the one-hot of the last action (CartPole: 2), and
    with `last_reward` it ends in the last reward (CartPole's 1)."""
    overrides = ["ray.num_actors=1", "network.core=lstm", "network.core_size=8"]
    if "last_reward" in inputs:
        overrides.append("impala.normalize_reward=false")
    algo, runner = impala_runner(
        [*overrides, f"ray.inference={inference}", f"network.core_inputs=[{inputs}]"],
        num_actors=1,
        learner_batch=1,
        requests_per_actor=1,
        inference=inference,
    )
    with runner:
        first, second = runner.next_unroll(), runner.next_unroll()
        for _ in range(2):
            update(runner)
    assert int(algo.optimizer.iterations) == 2
    np.testing.assert_array_equal(first.arrays["core_state"], 0.0)  # Episodes begin.
    actions = 2 if inputs else 0
    rewards = int("last_reward" in inputs)
    assert first.arrays["first"][0].all()
    assert second.arrays["core_state"].shape == (2, 16 + actions + rewards)
    # The second unroll's start states are zeros exactly where an episode begins.
    carried = np.abs(second.arrays["core_state"]).sum(-1) > 0  # [B]
    np.testing.assert_array_equal(carried, ~second.arrays["first"][0])
    if rewards:  # CartPole's reward of the step before the unroll, where carried.
        np.testing.assert_array_equal(second.arrays["core_state"][:, -1], carried)
    if inputs:  # The last action acted on before the unroll, one-hot, where carried.
        last = second.arrays["core_state"][:, 16:18]
        np.testing.assert_array_equal(last.sum(-1), carried.astype(np.float32))
        np.testing.assert_array_equal(last[carried].argmax(-1), first.arrays["sample"][-1][carried])


class EchoEnv(gym.Env):
    """Observations [id, t]: the seed of its first reset and the step of its episode.

    It takes only the action `100 * id + t` (raising ValueError for any other), so a
    policy that echoes the observation proves that each environment got its own row.
    Episodes last `EPISODE` steps, a reward of 1 each; actor `slow` sleeps `delay`
    seconds a step (actor i's seeds are 1000 i on).
    """

    EPISODE = 5
    observation_space = gym.spaces.Box(0.0, 1e6, (2,), np.float32)
    action_space = gym.spaces.Discrete(10**8)

    def __init__(self, slow: int, delay: float):
        self._slow, self._delay = slow, delay
        self._id = self._t = None

    def reset(self, *, seed=None, options=None):
        if self._id is None:
            self._id = seed
        self._t = 0
        return np.array([self._id, 0], np.float32), {}

    def step(self, action):
        if int(action) != 100 * self._id + self._t:
            raise ValueError(f"environment {self._id} at step {self._t} got action {action}")
        if self._id // 1000 == self._slow:
            time.sleep(self._delay)
        self._t += 1
        observ = np.array([self._id, self._t], np.float32)
        return observ, 1.0, self._t == self.EPISODE, False, {}


def echo_envs(slow: int = -1, delay: float = 0.0) -> BatchEnv:
    return BatchEnv([EchoEnv(slow, delay) for _ in range(2)], blocking=True)


class EchoPolicy(BehaviourPolicy):
    """Acts `100 * id + t` for observations [id, t]; recurrent, it counts t in its state
    (reset where `first`) instead of reading it, so wrong rows of states show."""

    def __init__(self, recurrent: bool = False):
        self.recurrent = recurrent

    def initial_state(self, batch_size):
        return np.zeros([batch_size, 1], np.float32) if self.recurrent else None

    def __call__(self, observ, first=None, state=None):
        ids, t = observ[:, 0].astype(np.int64), observ[:, 1].astype(np.int64)
        if self.recurrent:
            t = np.where(first, 0, state[:, 0]).astype(np.int64)
        action = 100 * ids + t
        result = (action, action, observ.copy())
        return (*result, (t + 1.0)[:, None].astype(np.float32)) if self.recurrent else result

    def load(self, weights):
        pass


@pytest.mark.parametrize("recurrent", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dynamic_batching_gives_each_actor_its_own_actions_without_waiting_for_a_slow_one(
    ray_cluster, recurrent
):
    """3 actors of 2 echo environments, at most 2 actors a forward pass, 0.05 s timeout;
    actor 2 sleeps 1 s a step. Every environment gets its own action (the environments
    check), every unroll is one actor's T=4 consecutive steps, no pass serves more than 2
    actors, and the fast actors fill the first unrolls: lockstep would give each actor
    one unroll in three. Recurrent (slow): the states fed back are each environment's
    own, and a killed actor is replaced by one that starts a new unroll. With a timeout
    shorter than its step, the slow actor is named in a TimeoutError."""
    import ray

    from batchrl.runners.ray import EnvActor
    from batchrl.runners.ray.dynamic_batcher import RayDynamicBatcher
    from batchrl.runners.ray.group import ActorGroup

    make_env = functools.partial(echo_envs, slow=2, delay=1.0)

    actors = ActorGroup(
        EnvActor,
        lambda index, seed: (make_env, None, seed, 1),
        3,
        cpus_per_actor=0.25,
        max_actor_restarts=1,
        timeout=RAY_TIMEOUT,
    )
    try:
        pids, _ = actor_info(actors.handles)
        assert set(pids) <= set(ray_actor_processes())
        policy = EchoPolicy(recurrent)
        batcher = RayDynamicBatcher(actors, policy, lambda _: EchoPolicy(recurrent), 4, 2, 0.05)
        unrolls = [batcher.next_unroll() for _ in range(8)]
        if recurrent:  # The slow variant also replaces a killed actor.
            victim = actors.handles[0]
            (victim_pid,), _ = actor_info([victim])
            ray.kill(victim, no_restart=True)
            end = time.monotonic() + 120
            while time.monotonic() < end:  # Until the replacement's first unroll.
                restarted = batcher.next_unroll()
                if restarted.actor == 0 and restarted.arrays["observ"][0, 0, 0] >= 100_000:
                    break
            assert actors.restarts == 1 and actors.handles[0] is not victim
            assert not wait_gone([victim_pid])
            pids, _ = actor_info(actors.handles)
        actors.timeout = 0.5  # Shorter than a slow step: the fast actors' answers do not hide it.
        with pytest.raises(TimeoutError, match=r"No result from Ray actors? [0-9, ]*2 for"):
            end = time.monotonic() + 60
            while time.monotonic() < end:
                batcher.next_unroll()
    finally:
        actors.close()
    assert not wait_gone(pids)
    assert max(batcher.batch_sizes) <= 2 and min(batcher.batch_sizes) >= 1
    assert 2 in batcher.batch_sizes  # Passes served two actors at once.
    counts = [sum(unroll.actor == index for unroll in unrolls) for index in range(3)]
    assert counts[2] <= 1 and counts[0] + counts[1] >= 7, counts
    steps = {index: [] for index in range(3)}  # Each actor's unrolls, in order.
    for unroll in unrolls:
        observ, next_observ = unroll.arrays["observ"], unroll.arrays["next_observ"]  # [4, 2, 2]
        ids = np.broadcast_to(1000 * unroll.actor + np.arange(2), (4, 2))  # Its own envs.
        np.testing.assert_array_equal(observ[..., 0], ids)
        np.testing.assert_array_equal(
            unroll.arrays["sample"], 100 * observ[..., 0] + observ[..., 1]
        )
        np.testing.assert_array_equal(unroll.arrays["output"], observ)
        np.testing.assert_array_equal(next_observ[..., 1], observ[..., 1] + 1)  # Consecutive.
        ended = next_observ[..., 1] == EchoEnv.EPISODE
        np.testing.assert_array_equal(unroll.arrays["terminated"], ended)
        assert len(unroll.returns) == ended.sum() and set(unroll.returns) <= {5.0}
        if recurrent:
            np.testing.assert_array_equal(unroll.arrays["core_state"][:, 0], observ[0, :, 1])
        steps[unroll.actor].append(observ[..., 1])
    for unrolls_of_actor in steps.values():  # t runs 0, 1, ..., 4, 0, ... across unrolls.
        if unrolls_of_actor:
            t = np.concatenate(unrolls_of_actor)[:, 0]
            np.testing.assert_array_equal(t, np.arange(len(t)) % EchoEnv.EPISODE)
    if recurrent:  # The replacement's environments (seeds 100,000 on) start a new unroll.
        np.testing.assert_array_equal(restarted.arrays["observ"][:, 0, 0], 100_000)
        np.testing.assert_array_equal(restarted.arrays["observ"][:, 0, 1], np.arange(4))
        np.testing.assert_array_equal(restarted.arrays["core_state"], 0.0)


def test_started_dynamic_batching_steps_while_the_learner_learns(ray_cluster):
    """After `start(2)` the batcher's thread acts and steps with nobody taking unrolls, as
    actors do while the learner learns, until 2 finished unrolls wait in its queue; then it
    waits. Weights given to `load` act from the next forward pass on (the unrolls'
    versions). `close` ends the thread, and `next_unroll` then says the batcher is closed.
    An error in the thread (an actor killed, no restarts left) is raised by `next_unroll`
    in the caller's thread, naming the actor."""
    import ray

    from batchrl.runners.ray import EnvActor
    from batchrl.runners.ray.dynamic_batcher import RayDynamicBatcher
    from batchrl.runners.ray.group import ActorGroup

    def settle(batcher):  # Until no forward pass for 1 s (at most 60 s).
        end, passes = time.monotonic() + 60, -1
        while len(batcher.batch_sizes) != passes and time.monotonic() < end:
            passes = len(batcher.batch_sizes)
            time.sleep(1.0)
        return passes

    actors = ActorGroup(
        EnvActor,
        lambda index, seed: (echo_envs, None, seed, 1),
        2,
        cpus_per_actor=0.25,
        max_actor_restarts=0,
        timeout=RAY_TIMEOUT,
    )
    try:
        pids, _ = actor_info(actors.handles)
        batcher = RayDynamicBatcher(actors, EchoPolicy(), lambda _: EchoPolicy(), 4, 2, 0.05)
        batcher.start(capacity=2)
        passes = settle(batcher)
        assert batcher._queue.full() and passes >= 8  # 2 unrolls of T=4 at least.
        batcher.load([], version=7)
        unrolls = [batcher.next_unroll() for _ in range(6)]
        assert [unroll.version for unroll in unrolls[:2]] == [0, 0]  # Acted before `load`.
        assert unrolls[-1].version == 7
        for unroll in unrolls:  # Each actor's own environments, consecutive steps.
            np.testing.assert_array_equal(
                unroll.arrays["sample"], 100 * unroll.arrays["observ"][..., 0]
                + unroll.arrays["observ"][..., 1]
            )  # fmt: skip
        batcher.close()
        assert not batcher._thread.is_alive()
        with pytest.raises(RuntimeError, match="batcher is closed"):
            for _ in range(3):  # The queue may hold 2 unrolls still.
                batcher.next_unroll()

        batcher = RayDynamicBatcher(actors, EchoPolicy(), lambda _: EchoPolicy(), 4, 2, 0.05)
        batcher.start(capacity=2)
        ray.kill(actors.handles[1], no_restart=True)
        with pytest.raises(RuntimeError, match="Ray actor 1 failed"):
            end = time.monotonic() + 60
            while time.monotonic() < end:
                batcher.next_unroll()
        assert not batcher._thread.is_alive()
    finally:
        actors.close()
    assert not wait_gone(pids)


def ray_actor_processes() -> list[int]:
    """The processes of this session's Ray actors of the IMPALA runner (`EnvActor`)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "EnvActor" in " ".join(process.cmdline()):
                found.append(process.pid)
        except psutil.Error:
            pass
    return found


@pytest.mark.slow  # Three more actors to start: 15 to 30 s.
def test_impala_with_dynamic_batching_trains_through_the_train_script(
    ray_cluster, tmp_path, event_tags
):
    """runner ray with ray.inference=dynamic, 3 actors, 1 actor a pass at least: the train
    script's run makes its updates, records the actors per pass, and its actors are gone
    at the end."""
    before = set(ray_actor_processes())
    overrides = [
        "env.id=CartPole-v1",
        "runner.name=ray",
        "ray.inference=dynamic",
        "ray.num_actors=3",
        "ray.inference_batch=2",
        "ray.cpus_per_actor=0.25",
        "train.total_steps=256",
        "train.eval_every=0",
    ]
    config = load_run_config("debug_impala", overrides)
    assert train(config, tmp_path, progress=quiet)["step"] == 256  # 4 updates of 2 x 16 x 2.
    tags = event_tags(tmp_path / "train")
    assert {"impala/policy_lag", "impala/inference_batch"} <= tags
    deadline = time.monotonic() + 30
    while set(ray_actor_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not set(ray_actor_processes()) - before


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["ray.inference=dynamic", "ray.inference_batch=3"], r"inference_batch=3.*1 to 2"),
        (["ray.inference_timeout=-1"], r"inference_timeout=-1"),
        (["ray.inference=lockstep"], r"ray.inference.*'dynamic'"),
    ],
)
def test_dynamic_batching_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config("debug_impala", ["runner.name=ray", "ray.num_actors=2", *overrides])
