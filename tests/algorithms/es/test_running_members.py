"""Skipping finished members (es.member_chunk) and common random numbers for mirrored pairs."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.es import ES, GenerationTrainer, PopulationPolicy
from batchrl.algorithms.es.es import common_streams
from batchrl.algorithms.es.generation import PopulationEvaluator
from batchrl.config import ConfigError, load_run_config
from batchrl.networks import PopulationNetwork
from tests.tools._in_graph_envs import Countdown

MEMBERS, PER_MEMBER = 10, 2


class SignNetwork(PopulationNetwork):
    """Logits [0, params[m, 0]]: member m takes action 1 when its parameter is positive."""

    num_params = 1

    def init_params(self, seed):
        return tf.zeros([1])

    def apply(self, params, observ):
        logit = tf.broadcast_to(params[:, None, :1], tf.concat([tf.shape(observ)[:2], [1]], 0))
        return tf.concat([tf.zeros_like(logit), logit], -1)  # [M, E, 2]


def expected_fitness(params):
    agents = np.arange(MEMBERS * PER_MEMBER)
    returns = (agents % 7 + 1) * (params[agents // PER_MEMBER, 0] > 0)
    return returns.reshape(MEMBERS, PER_MEMBER).mean(1)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("chunk", [0, 3])
def test_skipping_finished_members_keeps_every_first_episode(chunk, jit_compile):
    env = Countdown(np.arange(MEMBERS * PER_MEMBER) % 7 + 1, action_reward=1.0)
    policy = PopulationPolicy(
        SignNetwork(), env.action_space, MEMBERS, PER_MEMBER, member_chunk=chunk
    )
    evaluator = PopulationEvaluator(env, policy, max_steps=100, jit_compile=jit_compile)
    for signs in ([1, -1] * 5, [-1] * 5 + [1] * 5):  # Two calls: the loop restarts.
        params = np.asarray(signs, np.float32)[:, None]
        fitness, stats = evaluator(params)
        np.testing.assert_array_equal(fitness.numpy(), expected_fitness(params))
        assert int(stats["steps"]) == np.sum(np.arange(MEMBERS * PER_MEMBER) % 7 + 1)


def test_finished_members_output_zeros_and_running_ones_their_own():
    env = Countdown(np.arange(MEMBERS * PER_MEMBER) % 7 + 1, action_reward=1.0)
    policy = PopulationPolicy(SignNetwork(), env.action_space, MEMBERS, PER_MEMBER, member_chunk=4)
    finished = tf.Variable(tf.zeros([MEMBERS * PER_MEMBER], tf.bool))
    policy.skip_finished(finished)
    policy.start(tf.range(1, MEMBERS + 1, dtype=tf.float32)[:, None])
    done = np.zeros(MEMBERS * PER_MEMBER, bool)
    done[[0, 1, 2, 9, 10, 11]] = True  # Members 0 and 5 are done; 1 and 4 half done.
    finished.assign(done)
    output = policy._apply_running(tf.zeros([MEMBERS, PER_MEMBER, 1])).numpy()
    expected = np.arange(1, MEMBERS + 1, dtype=np.float32)
    expected[[0, 5]] = 0.0
    np.testing.assert_array_equal(output[:, :, 1], np.repeat(expected[:, None], PER_MEMBER, 1))


def test_negative_member_chunk_is_refused():
    with pytest.raises(ValueError, match="member_chunk=-1"):
        PopulationPolicy(SignNetwork(), gym.spaces.Discrete(2), 2, 1, member_chunk=-1)


def test_common_streams_pair_each_member_with_its_mirror():
    # N = 2 pairs, E = 2: members 0..3, agent a plays for member a // 2.
    np.testing.assert_array_equal(common_streams(2, 8), [0, 1, 2, 3, 0, 1, 2, 3])
    np.testing.assert_array_equal(common_streams(3, 6), [0, 1, 2, 0, 1, 2])


def test_a_slice_of_pairs_gets_the_streams_it_has_in_the_whole_batch():
    # N = 4 pairs, E = 2: a worker holds pairs 2 and 3, members 2, 3 and mirrors 6, 7.
    whole = common_streams(4, 16).reshape(8, 2)  # [members, E]
    np.testing.assert_array_equal(common_streams(2, 8, first_pair=2), whole[[2, 3, 6, 7]].ravel())
    np.testing.assert_array_equal(common_streams(2, 8, first_pair=2), [4, 5, 6, 7, 4, 5, 6, 7])


def test_common_random_numbers_need_restartable_streams():
    with pytest.raises(ConfigError, match="env.id='CartPole-v1' with env.backend='tensorflow'"):
        load_run_config("cartpole_es", ["es.common_random_numbers=true", "es.population=2"])
    with pytest.raises(ConfigError, match="env.backend='gymnasium' has none"):
        load_run_config(
            "nsfnet_es", ["env.backend=gymnasium", "train.jit_compile=false", "runner.name=ray"]
        )
    # A trainer handed other environments than the config's says so too.
    config = load_run_config("cartpole_es", ["es.population=2"])
    env = ES.make_batch_env(config, 0)
    algo = ES(env, config)
    common = load_run_config("nsfnet_es", ["es.population=2"])
    with pytest.raises(ConfigError, match="CartPole .* has no restart_streams"):
        GenerationTrainer(common, algo, env)


def test_common_random_numbers_run_on_the_local_and_ray_runners():
    pytest.importorskip("ray")
    for runner in ("local", "ray"):
        config = load_run_config("nsfnet_es", [f"runner.name={runner}"])
        assert config.es.common_random_numbers and config.runner.name == runner
    with pytest.raises(ConfigError, match="ray.num_actors=129; ES's 128 mirrored pairs"):
        load_run_config("nsfnet_es", ["runner.name=ray", "ray.num_actors=129"])
