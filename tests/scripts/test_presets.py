"""Every shipped preset trains one training call through the train script and exits 0."""

import pytest

from batchrl.config import default_config_dir
from batchrl.scripts import train as train_script

# One training call (the loop stops at the first step count >= 1), no evaluations on the
# way and a final evaluation of one episode on one environment.
ONE_CALL = ["train.total_steps=1", "train.eval_every=0", "train.eval_episodes=1", "env.eval_envs=1"]

# Cheap enough for the default suite (4 to 9 s each on 2 busy cores): CartPole and
# Pendulum on Gymnasium with PPO, DQN, IMPALA and TD3.
CHEAP = [
    "cartpole",
    "cartpole_dqn",
    "cartpole_impala",
    "pendulum",
    "pendulum_impala",
    "pendulum_td3",
]
# The rest: XLA compilations of the TensorFlow ports (13 to 40 s each), ES, SAC, the debug
# presets (which tests/scripts/test_train.py trains in the default suite), Atari (ale-py,
# IMPALA's ResNet), MinAtar, MuJoCo and routing at the presets' own sizes.
HEAVY = [
    "cartpole_dqn_tf",
    "cartpole_es",
    "cartpole_tf",
    "debug",
    "debug_impala",
    "default",
    "pendulum_es",
    "pendulum_sac",
    "pendulum_sac_tf",
    "pendulum_td3_tf",
    "pendulum_tf",
    "ant",
    "atari_impala",
    "breakout_impala",
    "breakout_minatar",
    "breakout_minatar_dqn",
    "cheetah",
    "geant2_es",
    "geant2_ppo",
    "halfcheetah_sac",
    "hopper",
    "hopper_es",
    "hopper_sac",
    "humanoid",
    "mixed_es",
    "mixed_ppo",
    "mujoco",
    "mujoco_sac",
    "nsfnet_es",
    "nsfnet_ppo",
    "pong_impala",
    "reacher",
    "walker",
    "walker_sac",
]
# Ray's runner: tests/runners/test_presets_ray.py trains them on the session's cluster.
RAY = [
    "breakout_minatar_apex_ray",
    "cartpole_apex_ray",
    "cartpole_es_ray",
    "cartpole_impala_ray",
    "cartpole_ppo_ray",
]


def train_one_call(preset, tmp_path, capsys):
    logdir = tmp_path / "run"
    code = train_script.main([f"--config={preset}", f"--logdir={logdir}", *_sets(ONE_CALL)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (logdir / "config.yaml").is_file()
    assert list((logdir / "checkpoints").glob("*.index")), "no checkpoint"


def _sets(overrides):
    return [arg for override in overrides for arg in ("--set", override)]


def test_every_preset_is_trained_by_one_of_the_tests():
    names = sorted(path.stem for path in default_config_dir().glob("*.yaml"))
    assert sorted(CHEAP + HEAVY + RAY) == names


# The heaviest of them (80 to 240 s each on 2 busy cores, 2026-12-06) run in the long tier,
# which CI leaves out for its time limit; the routing tests of the slow tier train the
# routing presets on Ray as well (tests/runners/test_ray.py).
LONG = {"geant2_es", "geant2_ppo", "mixed_es", "mixed_ppo", "breakout_minatar_apex_ray"}


def tier_mark(name):
    return pytest.mark.long if name in LONG else pytest.mark.slow


@pytest.mark.parametrize(
    "preset", [*CHEAP, *(pytest.param(name, marks=tier_mark(name)) for name in HEAVY)]
)
def test_a_preset_trains_one_call_and_exits_0(tmp_path, capsys, preset):
    train_one_call(preset, tmp_path, capsys)
