"""CoreStates: each agent's recurrent state, its rollout's start, and `first`, restored."""

import numpy as np
import tensorflow as tf

from batchrl.algorithms.ppo.core_states import CoreStates


def test_a_timeline_of_states_and_a_checkpoint(tmp_path):
    states = CoreStates(agents=3, state_size=2)
    states.begin(tf.constant([0, 1, 2]))  # Step 0: every episode begins.
    np.testing.assert_array_equal(states.read(tf.constant(True)), np.zeros([3, 2]))
    states.write(tf.fill([3, 2], 1.0))
    np.testing.assert_array_equal(states.take_first(), [True, True, True])
    np.testing.assert_array_equal(states.take_first(), [False, False, False])  # Cleared.
    states.begin(tf.constant([1]))  # Step 1: agent 1's next episode begins.
    state = states.read(tf.constant(False)).numpy()  # Not a rollout's first step.
    np.testing.assert_array_equal(state, [[1, 1], [0, 0], [1, 1]])
    np.testing.assert_array_equal(states.rollout_start, np.zeros([3, 2]))  # Step 0's.
    states.write(tf.constant([[2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]))
    np.testing.assert_array_equal(states.take_first(), [False, True, False])
    states.read(tf.constant(True))  # Step 2 begins a rollout: its start is kept.
    np.testing.assert_array_equal(states.rollout_start, [[2, 2], [3, 3], [4, 4]])
    path = tf.train.Checkpoint(states=states).write(str(tmp_path / "ckpt"))
    restored = CoreStates(agents=3, state_size=2)
    tf.train.Checkpoint(states=restored).read(path).assert_consumed()
    for name in ("state", "rollout_start", "first"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(states, name))
