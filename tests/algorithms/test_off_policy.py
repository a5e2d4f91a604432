"""What DQN and SAC share (`OffPolicy`): the transitions that reach replay around a resume."""

import gymnasium as gym
import pytest
import tensorflow as tf

from batchrl.algorithms.dqn import DQN
from batchrl.config import load_run_config
from batchrl.runners import train
from batchrl.tools.environments import EnvSpaces

# Episodes of exactly 5 steps that terminate; the observation is the step count in the
# episode so far, the reward of the k-th step is k (MockEnvironment's).
gym.register(
    "batchrl-test/Mock5Discrete-v0",
    entry_point="batchrl.testing.mock_environment:MockEnvironment",
    kwargs={
        "observation_shape": (1,),
        "action_space": gym.spaces.Discrete(2),
        "min_duration": 5,
        "max_duration": 5,
    },
)


def quiet(*_, **__):
    pass


def config(total_steps: int, compact: bool):
    return load_run_config(
        "cartpole_dqn",
        [
            f"env.id={__name__}:batchrl-test/Mock5Discrete-v0",
            "env.num_envs=2",
            "env.eval_envs=1",
            "network.policy_layers=[4]",
            "dqn.n_step=3",
            "dqn.discount=0.5",
            "dqn.buffer_size=64",
            "dqn.batch_size=4",
            "dqn.learning_starts=64",  # No learning (20 steps): only what is stored matters.
            "dqn.checkpoint_replay=true",
            f"dqn.compact_replay={str(compact).lower()}",
            "train.steps_per_call=1",
            "train.eval_every=0",
            "train.eval_episodes=1",
            f"train.checkpoint_every={total_steps}",
            f"train.total_steps={total_steps}",
        ],
    )


def stored_transitions(config, logdir) -> list[tuple[float, float, float, float]]:
    """(observ, reward, discount, next_observ) of every transition in the replay of the
    latest checkpoint in `logdir`, sorted."""
    algo = DQN(EnvSpaces(config.env, config.env.num_envs), config)
    path = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    tf.train.Checkpoint(algo=algo).restore(path).expect_partial()
    replay = algo.replay
    if config.dqn.compact_replay:
        batch = replay.read(tf.where(replay.holds)[:, 0])
    else:
        batch = replay.ring.read(tf.range(replay.size()))
    columns = [batch[key].numpy().reshape(-1) for key in ("observ", "reward", "discount")]
    columns.append(batch["next_observ"].numpy().reshape(-1))
    return sorted(zip(*(column.tolist() for column in columns)))


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "whole_transitions"])
def test_a_resume_on_gymnasium_closes_the_n_step_windows_at_the_restart(tmp_path, compact):
    # Two environments with episodes of 5 steps, n = 3, gamma = 0.5. The first run takes
    # 3 batched steps (a1 a2 a3) and checkpoints; the resumed run restarts the environments
    # and takes 7 more: a new episode (b1 .. b5, b5 terminal) and c1 c2 of the next.
    #
    #   step      a1 a2 a3 | b1 b2 b3 b4 b5* c1 c2
    #   observ     0  1  2 |  0  1  2  3  4   0  1
    #   reward     1  2  3 |  1  2  3  4  5   1  2
    #
    # The episode of a1 .. a3 was cut short by the restart: its windows end at a3 and
    # bootstrap from a3's next observation (3), as at a truncation. The windows of c1 and
    # c2 are still open. Each environment stores (observ, R, discount, next_observ):
    expected = [
        (0.0, 1 + 0.5 * 2 + 0.25 * 3, 0.125, 3.0),  # a1, stored before the checkpoint
        (1.0, 2 + 0.5 * 3, 0.25, 3.0),  # a2: not 2 + 0.5 * 3 + 0.25 * 1 from b1
        (2.0, 3.0, 0.5, 3.0),  # a3: not bootstrapping from b2's observation
        (0.0, 1 + 0.5 * 2 + 0.25 * 3, 0.125, 3.0),  # b1
        (1.0, 2 + 0.5 * 3 + 0.25 * 4, 0.125, 4.0),  # b2
        (2.0, 3 + 0.5 * 4 + 0.25 * 5, 0.0, 5.0),  # b3: b5 terminates its window
        (3.0, 4 + 0.5 * 5, 0.0, 5.0),  # b4
        (4.0, 5.0, 0.0, 5.0),  # b5
    ]
    logdir = tmp_path / "run"
    train(config(6, compact), logdir, progress=quiet)
    assert stored_transitions(config(6, compact), logdir) == sorted(expected[:1] * 2)
    train(config(20, compact), logdir, progress=quiet)
    assert stored_transitions(config(20, compact), logdir) == sorted(expected * 2)
