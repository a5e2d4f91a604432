"""The Atari torsos: output shapes and parameter counts worked out by hand, uint8 input."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.networks import MLP, ImpalaResNet, NatureConvNet, make_torso

# The Nature ConvNet on [84, 84, 4] (no padding), weights + biases:
#   conv 8x8, 4 -> 32, stride 4: 8*8*4*32 + 32   =     8,224; 84 -> (84 - 8) / 4 + 1 = 20
#   conv 4x4, 32 -> 64, stride 2: 4*4*32*64 + 64 =    32,832; 20 -> (20 - 4) / 2 + 1 = 9
#   conv 3x3, 64 -> 64, stride 1: 3*3*64*64 + 64 =    36,928;  9 -> 7
#   dense 7*7*64 = 3,136 -> 512: 3136*512 + 512  = 1,606,144
NATURE_PARAMETERS = 8_224 + 32_832 + 36_928 + 1_606_144  # 1,684,128
# IMPALA's ResNet on [84, 84, 4] (3x3 convolutions SAME, max-pool 3x3 stride 2 SAME):
#   stage 16: conv 3*3*4*16 + 16 = 592, four convs 4 * (3*3*16*16 + 16) = 9,280; 84 -> 42
#   stage 32: conv 3*3*16*32 + 32 = 4,640, four convs 4 * (3*3*32*32 + 32) = 36,992; -> 21
#   stage 32: conv 3*3*32*32 + 32 = 9,248, four convs 36,992; 21 -> 11
#   dense 11*11*32 = 3,872 -> 256: 3872*256 + 256 = 991,488
RESNET_PARAMETERS = (592 + 9_280) + (4_640 + 36_992) + (9_248 + 36_992) + 991_488  # 1,089,232


def count(module):
    return sum(int(np.prod(variable.shape)) for variable in module.trainable_variables)


@pytest.mark.parametrize(
    "torso, units, parameters",
    [(NatureConvNet, 512, NATURE_PARAMETERS), (ImpalaResNet, 256, RESNET_PARAMETERS)],
)
def test_shapes_and_parameter_counts(torso, units, parameters):
    network = torso()
    frames = tf.zeros([3, 84, 84, 4], tf.uint8)
    assert network(frames).shape == (3, units)
    assert count(network) == parameters
    assert parameters == {512: 1_684_128, 256: 1_089_232}[units]


def test_the_resnet_has_the_papers_layers():
    network = ImpalaResNet()
    network(tf.zeros([1, 84, 84, 4], tf.uint8))
    shapes = [tuple(v.shape) for v in network.trainable_variables]
    kernels = [shape for shape in shapes if len(shape) == 4]
    assert all(shape[:2] == (3, 3) for shape in kernels)
    # A stage: its convolution and two residual blocks of two convolutions each.
    assert sorted(shape[-1] for shape in kernels) == [16] * 5 + [32] * 10
    assert (11 * 11 * 32, 256) in shapes


@pytest.mark.parametrize("torso", [NatureConvNet, ImpalaResNet])
def test_uint8_frames_are_scaled_to_unit_floats_inside(torso):
    network = torso()
    frames = np.random.default_rng(0).integers(0, 256, size=(2, 84, 84, 4)).astype(np.uint8)
    from_bytes = network(frames)
    from_floats = network(frames.astype(np.float32) / 255.0)
    np.testing.assert_allclose(from_bytes, from_floats, rtol=1e-5, atol=1e-6)
    assert float(tf.reduce_max(tf.abs(from_bytes))) > 0


def test_network_config_selects_the_torso_and_linear_heads():
    def network(torso):
        overrides = [f"network.torso={torso}", "network.policy_layers=[]"]
        return load_run_config("debug_impala", overrides).network

    assert isinstance(make_torso(network("deep")), ImpalaResNet)
    assert isinstance(make_torso(network("shallow")), NatureConvNet)
    assert make_torso(network("none")) is None
    # The Atari presets' policy: the torso, then one linear layer to Pong's 6 logits.
    policy = MLP(network("deep").policy_layers, 6, "relu", 0.01, torso=make_torso(network("deep")))
    assert policy(tf.zeros([5, 84, 84, 4], tf.uint8)).shape == (5, 6)
    assert count(policy) == RESNET_PARAMETERS + 256 * 6 + 6


def test_torsos_survive_a_checkpoint(tmp_path):
    frames = tf.ones([1, 84, 84, 4], tf.uint8)
    network, copy = ImpalaResNet(), ImpalaResNet()
    network(frames), copy(frames)
    path = tf.train.Checkpoint(network=network).save(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(network=copy).restore(path).assert_consumed()
    np.testing.assert_array_equal(network(frames), copy(frames))
