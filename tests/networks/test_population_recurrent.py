"""PopulationRecurrent: M recurrent networks in one pass compute what each one computes."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.networks import PopulationRecurrent, RecurrentNetwork

MEMBERS, AGENTS, OBSERV, UNITS, OUTPUT, STEPS = 3, 5, 4, 6, 2, 7


def _networks(cell):
    nets = [RecurrentNetwork(cell, UNITS, [8], OUTPUT, "tanh", 0.5) for _ in range(MEMBERS)]
    for net in nets:
        net(tf.zeros([1, OBSERV]), net.initial_state(1))  # Builds the variables.
    population = PopulationRecurrent(cell, UNITS, OBSERV, [8], OUTPUT, "tanh", 0.5)
    params = tf.stack([population.flatten(net) for net in nets])  # [M, D]
    return nets, population, params


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_a_step_and_an_unroll_compute_what_each_member_network_does(cell, graph):
    nets, population, params = _networks(cell)
    assert params.shape == (MEMBERS, population.num_params)
    assert population.init_params(0).shape == (population.num_params,)
    observ = tf.random.stateless_normal([STEPS, MEMBERS, AGENTS, OBSERV], seed=[1, 2])
    state = tf.random.stateless_normal([MEMBERS, AGENTS, population.state_size], seed=[3, 4])
    # Episodes start at step 0 of agent 1 and step 4 of agents 0 and 3 (member 2 only).
    first = np.zeros([STEPS, MEMBERS, AGENTS], bool)
    first[0, :, 1] = True
    first[4, 2, [0, 3]] = True
    step, unroll = population.step, population.unroll
    if graph:
        step = tf.function(step, autograph=False)
        unroll = tf.function(unroll, autograph=False)
    output, new_state = step(params, observ[0], state)  # [M, E, out], [M, E, S]
    outputs = unroll(params, observ, tf.constant(first), state)  # [T, M, E, out]
    for member, net in enumerate(nets):
        expected, expected_state = net(observ[0, member], state[member])
        np.testing.assert_allclose(output[member], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_state[member], expected_state, rtol=1e-5, atol=1e-6)
        expected = net.unroll(observ[:, member], first[:, member], state[member])
        np.testing.assert_allclose(outputs[:, member], expected, rtol=1e-5, atol=1e-6)


def test_a_network_of_another_cell_or_size_is_refused():
    nets, _, _ = _networks("gru")
    with pytest.raises(ValueError, match="is not a lstm cell"):
        PopulationRecurrent("lstm", UNITS, OBSERV, [8], OUTPUT).flatten(nets[0])
    with pytest.raises(ValueError, match="is not a gru cell"):
        PopulationRecurrent("gru", UNITS + 1, OBSERV, [8], OUTPUT).flatten(nets[0])
    with pytest.raises(ValueError, match="Unknown cell 'rnn'"):
        PopulationRecurrent("rnn", UNITS, OBSERV, [8], OUTPUT)
