"""The ray runner on a real two-node loopback cluster: IMPALA actors, PPO samplers, ES workers."""

import functools
import logging
import signal
import sys
import time

import numpy as np
import psutil
import pytest
import tensorflow as tf

from batchrl.algorithms import IMPALA, PPO
from batchrl.algorithms.es import ES, GenerationTrainer
from batchrl.config import ConfigError, load_run_config
from batchrl.runners import LocalTrainer, train
from batchrl.scripts import train as train_script
from batchrl.tools.environments import EnvSpaces, make_batch_env, make_in_graph_env
from tests.algorithms.es.test_es import SMALL, FixedStartCartPole
from tests.runners.conftest import REPO
from tests.scripts.test_train import TRAIN_IN_PROCESSES, run_script, wait_for_progress

pytest.importorskip("ray")

from batchrl.runners.ray import (  # noqa: E402
    RayActorLearner,
    RayPopulation,
    RaySamplers,
    make_behaviour_policy,
    merge_statistics,
    samplers,  # noqa: E402
)

# The processes of every IMPALA actor the tests saw, checked to be gone after close.
SEEN = set()


def quiet(*_, **__):
    pass


def wait_gone(pids, seconds=20.0):
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
    with RayPopulation(config, remote, 2, make_env=fixed_start_env, timeout=180) as population:
        assert population.slices == [(0, 4), (4, 8)]
        _, nodes = actor_info(population.workers)
        assert len(set(nodes)) == 2
        pids, _ = actor_info(population.workers)
        for _ in range(3):
            local_steps, local_stats = trainer.step()
            steps, stats = population.step()
            assert steps == local_steps
            assert stats["mean_return"] == pytest.approx(float(local_stats["mean_return"]))
    assert int(remote.strategy.generation) == 3
    for name in ("theta", "m", "v"):
        np.testing.assert_array_equal(
            getattr(remote.strategy, name).numpy(), getattr(local.strategy, name).numpy()
        )
    assert not wait_gone(pids)


@pytest.fixture(scope="module")
def impala(ray_cluster):
    """IMPALA on CartPole with 2 Ray actors of 2 environments in worker processes, T=16."""
    config = load_run_config(
        "debug_impala",
        ["env.id=CartPole-v1", "env.processes=true", "runner.name=ray", "ray.num_actors=2"],
    )
    algo = IMPALA(EnvSpaces(config.env, config.env.num_envs), config)
    runner = RayActorLearner(
        functools.partial(make_batch_env, config.env, config.env.num_envs),
        functools.partial(make_behaviour_policy, config),
        algo,
        num_actors=2,
        unroll_length=16,
        learner_batch=2,
        requests_per_actor=2,
        timeout=180,
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


@pytest.mark.slow  # Two more actors to start: 15 to 30 s.
def test_central_inference_acts_for_all_actors_with_the_newest_weights(ray_cluster):
    """ray.inference=central: every update learns from T steps of all actors' environments,
    acted on in this process with the weights of that update (lag 0)."""
    config = load_run_config(
        "debug_impala", ["env.id=CartPole-v1", "runner.name=ray", "ray.inference=central"]
    )
    algo = IMPALA(EnvSpaces(config.env, config.env.num_envs), config)
    runner = RayActorLearner(
        functools.partial(make_batch_env, config.env, config.env.num_envs),
        functools.partial(make_behaviour_policy, config),
        algo,
        num_actors=2,
        unroll_length=16,
        inference="central",
        timeout=180,
    )
    with runner:
        pids, _ = actor_info(runner.actors)
        episodes = 0
        for _ in range(3):
            steps, stats = runner.update()
            assert steps == 16 * 2 * 2  # T x (2 actors x B=2).
            assert stats["policy_lag"] == 0.0
            episodes += stats["episodes"]
        assert runner.version == 3
        assert episodes >= 1  # Episodes end and are counted (CartPole's, of the initial policy).
    assert not wait_gone(pids)


def test_an_error_in_the_actors_code_is_logged_in_full_and_stops_when_it_repeats(
    ray_cluster, caplog
):
    """The first failure logs the remote traceback; the same from the replacement stops."""
    import ray

    from batchrl.runners.ray.actors import Actors

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
    actors = Actors(lambda index, restarts: Buggy.remote(), max_restarts=10, timeout=60)
    actors.start(1)
    try:
        assert actors.replace(0, *fail(actors))
        assert "Ray actor 0 failed (KeyError: 'missing key'); replacing it" in caplog.text
        assert 'in work\n    return {}["missing key"]' in caplog.text  # The remote traceback.
        with pytest.raises(RuntimeError, match="Ray actor 0, a replacement, raised KeyError"):
            actors.replace(0, *fail(actors))
        assert actors.restarts == 2  # Not ray.max_actor_restarts=10.
    finally:
        actors.close()


def ppo_state(algo):
    """What PPO learns and carries from update to update, by name."""
    state = {v.name + str(i): v for i, v in enumerate(algo.trainable_variables)}
    state.update({f"optimizer/{i}": v for i, v in enumerate(algo.optimizer.variables)})
    for normalizer in algo.statistics():
        state.update({f"{normalizer.name}/{v.name}": v for v in normalizer.variables})
    state["rng"] = algo.rng.state
    return {name: value.numpy() for name, value in state.items()}


def test_ppo_on_one_ray_actor_equals_local_ppo(ray_cluster, monkeypatch):
    """One sampler actor, 4 updates of PPO on CartPole (2 environments, T=16, observations
    and rewards normalized): the rollouts, and the parameters, Adam's moments, the
    normalizers' statistics and the random stream after every update, are bitwise those
    of the local runner for the same seeds."""
    config = load_run_config("debug", ["env.id=CartPole-v1", "runner.name=ray"])
    assert config.ppo.normalize_observ and config.ppo.normalize_reward
    env = make_in_graph_env(config.env, 2, seed=7)
    local = PPO(env, config, seed=0)
    remote = PPO(EnvSpaces(config.env, 2), config, seed=0)
    for mine, theirs in zip(remote.trainable_variables, local.trainable_variables, strict=True):
        mine.assign(theirs)
    rollouts = []
    concatenate = samplers.concatenate
    monkeypatch.setattr(
        samplers, "concatenate", lambda parts: rollouts.append(parts) or concatenate(parts)
    )
    trainer = LocalTrainer(config, local, env)
    with RaySamplers(config, remote, 1, rollout_length=16, seed=7, timeout=180) as runner:
        (pid,), _ = actor_info(runner.actors)
        for update in range(4):
            local_steps, local_stats = trainer.step()
            steps, stats = runner.step()
            assert steps == local_steps == 32
            assert stats["episodes"] == int(local_stats["episodes"])
            (rollout,) = rollouts[update]
            for key, value in local.rollout.read().items():
                np.testing.assert_array_equal(rollout[key], value.numpy(), err_msg=key)
            want, got = ppo_state(local), ppo_state(remote)
            assert want.keys() == got.keys()
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert int(remote.optimizer.iterations) == 4 * 2 * 2  # Updates x epochs x minibatches.
    assert not wait_gone([pid])
    env.close()


# What only the local run's algorithm holds: its acting buffers, which a Sampler's copy holds
# on Ray (the last rollout, the latest action, each environment's discounted return).
ACTING_BUFFERS = ("algo/rollout/data/", "algo/_last_", "algo/_discounted_return/")


@pytest.mark.slow  # Two runs: 15 to 30 s.
def test_a_train_run_on_one_ray_actor_checkpoints_what_the_local_run_does(ray_cluster, tmp_path):
    """`train` with runner ray and one actor, 4 updates and 2 evaluations: every tensor of
    its checkpoint but the acting buffers is bitwise that of the local runner's run."""
    common = ["env.id=CartPole-v1", "train.total_steps=128", "train.eval_every=64"]
    train(load_run_config("debug", common), tmp_path / "local", progress=quiet)
    ray_run = ["runner.name=ray", "ray.num_actors=1", "ray.cpus_per_actor=0.5"]
    train(load_run_config("debug", [*common, *ray_run]), tmp_path / "ray", progress=quiet)
    local, remote = (
        tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / run / "checkpoints")))
        for run in ("local", "ray")
    )
    keys = [key for key in local.get_variable_to_shape_map() if "OBJECT_GRAPH" not in key]
    compared = [key for key in keys if not key.startswith(ACTING_BUFFERS)]
    assert len(compared) > 30 and "step/.ATTRIBUTES/VARIABLE_VALUE" in compared
    for key in compared:
        np.testing.assert_array_equal(remote.get_tensor(key), local.get_tensor(key), err_msg=key)
    assert int(remote.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 128


def test_ppo_samplers_on_two_nodes_seed_apart_and_learn_on_all_rollouts(ray_cluster):
    """Two actors of 2 environments: one on each node; the learner's batch is [T, 2 + 2]
    of different episodes, and its observation statistics count every step of both."""
    config = load_run_config("debug", ["env.id=CartPole-v1", "runner.name=ray"])
    algo = PPO(EnvSpaces(config.env, 4), config, seed=0)
    rollouts = []
    concatenate = samplers.concatenate
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(samplers, "concatenate", lambda p: rollouts.append(p) or concatenate(p))
        with RaySamplers(config, algo, 2, rollout_length=16, timeout=180) as runner:
            pids, nodes = actor_info(runner.actors)
            assert len(set(nodes)) == 2
            for _ in range(2):
                steps, stats = runner.step()
                assert steps == 16 * 2 * 2
    assert float(algo.observ_normalizer.count) == 2 * 16 * 4
    assert int(algo.optimizer.iterations) == 2 * 2 * 2
    first, second = rollouts[0]
    assert first["observ"].shape == second["observ"].shape == (16, 2, 4)
    assert not np.array_equal(first["observ"], second["observ"])  # Seeded apart.
    assert not np.array_equal(first["sample"], second["sample"])
    assert not wait_gone(pids)


@pytest.mark.slow  # Two runs, each starting two actors: 30 to 60 s.
def test_train_cartpole_ppo_ray_checkpoints_resumes_and_leaves_no_actor(
    ray_cluster, tmp_path, event_tags
):
    """The train script's `train` with the cartpole_ppo_ray preset (2 actors, shrunk): PPO's
    summaries, a checkpoint, a resume, and no Sampler actor's process after either run
    (Ray titles an actor's process `ray::Sampler...`)."""

    def samplers_alive():
        processes = psutil.Process().children(recursive=True)
        return [p.pid for p in processes if "ray::Sampler" in " ".join(_cmdline(p))]

    overrides = [
        "env.num_envs=2",
        "ppo.rollout_length=16",
        "ppo.minibatches=2",
        "ppo.epochs=2",
        "train.steps_per_call=32",
        "train.eval_every=128",
        "train.eval_episodes=2",
        "env.eval_envs=2",
        "train.checkpoint_every=128",
    ]
    config = load_run_config("cartpole_ppo_ray", [*overrides, "train.total_steps=128"])
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 128  # 1 call of 2 updates of 16 steps x (2 actors x 2 envs).
    assert np.isfinite(result["eval_return"])
    assert {"ppo/policy_loss", "ppo/kl", "simulate/mean_return"} <= event_tags(tmp_path / "train")
    messages, seen = [], []

    def progress(text, **_):
        messages.append(text)
        seen.append(len(samplers_alive()))

    config = load_run_config("cartpole_ppo_ray", [*overrides, "train.total_steps=256"])
    result = train(config, tmp_path, progress=progress)
    assert result["step"] == 256
    assert any("Resumed from" in text and "at step 128" in text for text in messages), messages
    assert max(seen) == 2  # While training, the check sees both actors.
    deadline = time.monotonic() + 30
    while alive := samplers_alive():
        assert time.monotonic() < deadline, f"Sampler actors outlived the runs: {alive}"
        time.sleep(0.5)


def _cmdline(process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # Gone already.
        return []


@pytest.mark.parametrize("preset, name", [("cartpole_dqn", "dqn"), ("pendulum_sac", "sac")])
def test_off_policy_algorithms_are_refused_on_ray_at_config_load(
    tmp_path, capsys, monkeypatch, preset, name
):
    """Exit code 2, one message saying why, and nothing written."""
    monkeypatch.chdir(tmp_path)
    code = train_script.main([f"--config={preset}", "--set", "runner.name=ray", "--logdir=run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"algorithm.name='{name}' is off-policy" in err, err
    assert "no off-policy path yet" in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == [], "wrote files for a refused config"


def test_ppo_on_ray_refuses_updates_after_episodes():
    with pytest.raises(ConfigError, match="update_mode='episodes'.*has no Ray path"):
        load_run_config("cartpole_ppo_ray", ["ppo.update_mode=episodes"])


@pytest.mark.slow
def test_sigterm_on_a_ppo_ray_run_saves_and_leaves_no_process(tmp_path, monkeypatch):
    """PPO with 2 sampler actors whose environments are worker processes, in a run that
    starts its own Ray: SIGTERM saves a checkpoint, and every process under it is gone."""
    logdir = tmp_path / "run"
    code = TRAIN_IN_PROCESSES.format(
        logdir=str(logdir),
        extra=["runner.name=ray", "ray.num_actors=2", "ray.cpus_per_actor=0.5"],
        preset="debug",
    )
    # The script and its Ray workers import this checkout's batchrl, not an installed one.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    process = run_script(tmp_path, code)
    try:
        wait_for_progress(process, 3)
        children = [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
        assert len(children) >= 2 + 2 * 2  # Ray's own, 2 actors, 2 workers each.
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, output
    assert "SIGTERM: saved a checkpoint" in output
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")) is not None
    assert not wait_gone(children, 30), "processes of the run outlived it"
