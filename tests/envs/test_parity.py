"""Step-by-step parity of the in-graph classic-control environments with Gymnasium.

Each test sets the same float32 states in `gym.make(id).unwrapped` and in the batched
TensorFlow environment, steps both with the same actions and compares next state,
observation, reward and termination. Tolerance: rtol = atol = 1e-5 (we compute in float32,
Gymnasium mostly in float64); termination flags must agree exactly.
"""

import math

import gymnasium as gym
import numpy as np
import pytest

from batchrl import envs

RTOL = ATOL = 1e-5


def gym_steps(env_id, states, actions, state_dtype):
    """Steps a fresh episode of Gymnasium's `env_id` once from each state; stacks results."""
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    results = []
    for state, action in zip(states, actions, strict=True):
        env.state = np.array(state, dtype=state_dtype)
        if hasattr(env, "steps_beyond_terminated"):
            env.steps_beyond_terminated = None  # A fresh episode, as after our reset.
        observ, reward, terminated, truncated, _ = env.step(action)
        assert not truncated
        results.append((np.array(env.state, np.float64), observ, reward, terminated))
    env.close()
    return [np.array(column) for column in zip(*results, strict=True)]


def tf_step(env, states, actions):
    env.reset()
    env.set_state(states)
    observ, reward, terminated, truncated = env.step(actions)
    assert not truncated.numpy().any()
    return env.state.numpy(), observ.numpy(), reward.numpy(), terminated.numpy()


def assert_angles_close(actual, desired):
    """Compares wrapped angles; within 1e-3 of +-pi they may wrap either way."""
    assert (np.abs(actual) <= np.float32(math.pi)).all()
    inside = np.abs(desired) < math.pi - 1e-3
    np.testing.assert_allclose(actual[inside], desired[inside], rtol=RTOL, atol=ATOL)
    difference = np.mod(actual - desired + math.pi, 2 * math.pi) - math.pi
    np.testing.assert_allclose(difference, 0.0, atol=ATOL)


def check_parity(env_cls, env_id, states, actions, gym_actions, state_dtype, angles=()):
    states = np.asarray(states, np.float32)
    env = env_cls(len(states))
    state, observ, reward, terminated = tf_step(env, states, actions)
    gym_state, gym_observ, gym_reward, gym_terminated = gym_steps(
        env_id, states, gym_actions, state_dtype
    )
    other = [i for i in range(states.shape[1]) if i not in angles]
    np.testing.assert_allclose(state[:, other], gym_state[:, other], rtol=RTOL, atol=ATOL)
    for i in angles:
        assert_angles_close(state[:, i], gym_state[:, i])
    assert observ.dtype == np.float32
    np.testing.assert_allclose(observ, gym_observ, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(reward, gym_reward, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(terminated, gym_terminated)
    return terminated


def test_pendulum_parity():
    rng = np.random.default_rng(1)
    n = 200
    states = np.stack([rng.uniform(-3 * math.pi, 3 * math.pi, n), rng.uniform(-8, 8, n)], 1)
    pi32 = np.float32(math.pi)
    edges = [
        [pi32, 0.0],
        [-pi32, 0.0],
        [math.pi - 1e-3, 8.0],
        [-math.pi + 1e-3, -8.0],
        [math.pi + 1e-3, 7.99],
        [-math.pi - 1e-3, -7.99],
        [0.0, 7.9999],
        [1.0, -8.0],
        [-2.0, 8.0],
    ]
    states = np.concatenate([states, edges])
    # Torques beyond [-2, 2] are clipped for the dynamics and for the cost.
    torques = rng.uniform(-5, 5, len(states)).astype(np.float32)
    torques[-len(edges) :] = [5.0, -5.0, 2.0, -2.0, 2.0, -2.0, 2.0, -3.0, 3.0]
    actions = torques[:, None]
    terminated = check_parity(envs.Pendulum, "Pendulum-v1", states, actions, actions, np.float64)
    assert not terminated.any()


def test_cartpole_parity():
    rng = np.random.default_rng(2)
    n = 300
    threshold = 12 * 2 * math.pi / 360
    states = np.stack(
        [
            rng.uniform(-2.45, 2.45, n),
            rng.uniform(-3, 3, n),
            rng.uniform(-threshold - 0.01, threshold + 0.01, n),
            rng.uniform(-3, 3, n),
        ],
        1,
    )
    # Just inside the thresholds, stepping out of them or staying in.
    edges = [
        [2.4 - 1e-3, 1.0, 0.0, 0.0],
        [2.4 - 1e-3, -1.0, 0.0, 0.0],
        [-2.4 + 1e-3, -1.0, 0.0, 0.0],
        [0.0, 0.0, threshold - 1e-3, 1.0],
        [0.0, 0.0, -threshold + 1e-3, -1.0],
        [0.0, 0.0, threshold - 1e-3, -1.0],
    ]
    states = np.concatenate([states, edges])
    actions = rng.integers(0, 2, len(states)).astype(np.int32)
    terminated = check_parity(
        envs.CartPole, "CartPole-v1", states, actions, [int(a) for a in actions], np.float64
    )
    assert terminated.any() and not terminated.all()


@pytest.mark.filterwarnings("ignore:.*already returned terminated")
def test_cartpole_reward_after_termination():
    env = envs.CartPole(1)
    gym_env = gym.make("CartPole-v1").unwrapped
    gym_env.reset(seed=0)
    env.reset()
    state = np.array([[2.39, 2.0, 0.0, 0.0]], np.float32)
    env.set_state(state)
    gym_env.state = state[0].astype(np.float64)
    for _ in range(3):  # Terminating step, then two steps past termination.
        _, reward, terminated, _ = env.step([1])
        _, gym_reward, gym_terminated, _, _ = gym_env.step(1)
        assert terminated.numpy()[0] == gym_terminated
        assert reward.numpy()[0] == gym_reward
    assert reward.numpy()[0] == 0.0
    env.reset()
    env.set_state(state)
    assert env.step([1])[1].numpy()[0] == 1.0


def test_mountain_car_continuous_parity():
    rng = np.random.default_rng(3)
    n = 300
    states = np.stack([rng.uniform(-1.2, 0.6, n), rng.uniform(-0.07, 0.07, n)], 1)
    f32 = np.float32
    # Lands exactly on float32(0.45) < 0.45; Gymnasium's float32 state meets the goal
    # because NumPy 2 compares a float32 with a Python float in float32.
    below_goal = f32(0.45) - f32(0.07)
    assert f32(below_goal + f32(0.07)) == f32(0.45)
    edges = [
        [-1.2, -0.07],  # At the left wall, pushing into it: stops.
        [-1.19, -0.07],  # Hits the wall this step.
        [-1.2, 0.0],
        [-1.2, 0.01],  # Leaves the wall.
        [0.0, 0.07],  # Speed limit.
        [0.0, -0.07],
        [0.44, 0.02],  # Reaches the goal.
        [0.45, 0.0],  # At the goal but rolling back.
        [0.59, 0.07],  # Clipped at the right end.
        [below_goal, 0.07],
        [0.45 - 0.07, 0.07],
    ]
    states = np.concatenate([states, edges])
    forces = rng.uniform(-2, 2, len(states)).astype(np.float32)
    forces[-len(edges) :] = [-1.0, -2.0, -1.0, 1.0, 1.5, -1.5, 1.0, 0.0, 1.0, 1.0, 1.0]
    actions = forces[:, None]
    terminated = check_parity(
        envs.MountainCarContinuous, "MountainCarContinuous-v0", states, actions, actions, f32
    )
    assert terminated.any() and not terminated.all()
    assert terminated[-2]


def test_acrobot_parity():
    rng = np.random.default_rng(4)
    n = 200
    max_vel_1, max_vel_2 = 4 * math.pi, 9 * math.pi
    states = np.stack(
        [
            rng.uniform(-math.pi, math.pi, n),
            rng.uniform(-math.pi, math.pi, n),
            rng.uniform(-max_vel_1, max_vel_1, n),
            rng.uniform(-max_vel_2, max_vel_2, n),
        ],
        1,
    )
    pi = math.pi - 1e-4
    edges = [
        [pi, pi, max_vel_1, max_vel_2],
        [-pi, -pi, -max_vel_1, -max_vel_2],
        [pi, -pi, max_vel_1 - 0.01, -max_vel_2 + 0.01],
        [0.0, 0.0, max_vel_1, -max_vel_2],
        [math.pi, 0.0, 0.0, 0.0],  # Hanging up: terminal.
        [0.1, -0.1, 0.05, 0.0],
    ]
    states = np.concatenate([states, edges])
    actions = rng.integers(0, 3, len(states)).astype(np.int32)
    terminated = check_parity(
        envs.Acrobot,
        "Acrobot-v1",
        states,
        actions,
        [int(a) for a in actions],
        np.float32,
        angles=(0, 1),
    )
    assert terminated.any() and not terminated.all()


ENV_IDS = [
    (envs.Pendulum, "Pendulum-v1", np.array([0.5], np.float32)),
    (envs.CartPole, "CartPole-v1", 1),
    (envs.MountainCarContinuous, "MountainCarContinuous-v0", np.array([0.5], np.float32)),
    (envs.Acrobot, "Acrobot-v1", 1),
]


@pytest.mark.parametrize("env_cls, env_id, action", ENV_IDS)
def test_spaces_and_time_limit_match_gymnasium(env_cls, env_id, action):
    env = env_cls(1)
    gym_env = gym.make(env_id)
    assert env.max_episode_steps == gym.spec(env_id).max_episode_steps
    assert env.observation_space == gym_env.observation_space
    assert env.action_space == gym_env.action_space
    gym_env.close()


@pytest.mark.parametrize("env_cls, env_id, action", ENV_IDS)
def test_truncation_at_the_limit(env_cls, env_id, action):
    limit = 4
    env = env_cls(2, max_episode_steps=limit)
    gym_env = gym.make(env_id, max_episode_steps=limit)
    gym_env.reset(seed=0)
    env.reset()
    env.set_state(np.repeat(np.asarray(gym_env.unwrapped.state, np.float32)[None], 2, 0))
    for step in range(1, limit + 2):
        _, _, terminated, truncated = env.step(np.stack([action, action]))
        _, _, gym_terminated, gym_truncated, _ = gym_env.step(action)
        assert not terminated.numpy().any() and not gym_terminated
        assert truncated.numpy().tolist() == [gym_truncated] * 2 == [step >= limit] * 2
    env.reset([0])
    assert env.truncated.numpy().tolist() == [False, True]
    assert not env.step(np.stack([action, action]))[3].numpy()[0]
    gym_env.close()


def test_terminated_and_truncated_at_the_same_step():
    # Gymnasium's TimeLimit reports truncated at the limit even when the step terminates.
    env = envs.CartPole(1, max_episode_steps=1)
    gym_env = gym.make("CartPole-v1", max_episode_steps=1)
    gym_env.reset(seed=0)
    env.reset()
    state = np.array([2.39, 2.0, 0.0, 0.0], np.float32)
    env.set_state(state[None])
    gym_env.unwrapped.state = state.astype(np.float64)
    _, _, terminated, truncated = env.step([1])
    _, _, gym_terminated, gym_truncated, _ = gym_env.step(1)
    assert gym_terminated and gym_truncated
    assert terminated.numpy()[0] and truncated.numpy()[0]
    assert env.done.numpy()[0]
