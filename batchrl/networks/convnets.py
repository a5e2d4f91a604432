"""The Atari torsos of IMPALA: the "shallow" Nature ConvNet and the "deep" ResNet."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from batchrl.networks.mlp import Conv2D, Linear, as_float


def _conv(filters: int, kernel: int, stride: int = 1, padding: str = "VALID") -> Conv2D:
    """A convolution of the torsos, initialized orthogonally with ReLU's gain sqrt(2)."""
    return Conv2D(filters, np.sqrt(2), kernel=kernel, stride=stride, padding=padding)


class NatureConvNet(tf.Module):
    """IMPALA's "shallow" network, the Nature DQN ConvNet (Mnih et al. 2015), as TorchBeast.

    Frames [N, 84, 84, 4] -> conv 32 8x8 stride 4 -> conv 64 4x4 stride 2 -> conv 64 3x3
    stride 1 (each with ReLU, no padding: 20x20, 9x9, 7x7) -> dense 512 with ReLU -> [N, 512].
    uint8 frames are scaled to [0, 1] here.
    """

    def __init__(self, units: int = 512, name: str | None = None):
        super().__init__(name=name)
        self.conv = [_conv(32, 8, 4), _conv(64, 4, 2), _conv(64, 3, 1)]
        self.dense = Linear(units, gain=np.sqrt(2))

    @tf.Module.with_name_scope
    def __call__(self, x):
        x = as_float(x)  # [N, H, W, C]
        for layer in self.conv:
            x = tf.nn.relu(layer(x))
        x = tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])  # [N, 7 * 7 * 64]
        return tf.nn.relu(self.dense(x))  # [N, units]


class ResidualBlock(tf.Module):
    """x + conv(relu(conv(relu(x)))), two 3x3 convolutions with SAME padding."""

    def __init__(self, filters: int, name: str | None = None):
        super().__init__(name=name)
        self.conv = [_conv(filters, 3, padding="SAME"), _conv(filters, 3, padding="SAME")]

    @tf.Module.with_name_scope
    def __call__(self, x):
        y = x
        for layer in self.conv:
            y = layer(tf.nn.relu(y))
        return x + y


class ResNetStage(tf.Module):
    """A 3x3 convolution, a 3x3 max-pool with stride 2 (SAME), two residual blocks."""

    def __init__(self, filters: int, name: str | None = None):
        super().__init__(name=name)
        self.conv = _conv(filters, 3, padding="SAME")
        self.blocks = [ResidualBlock(filters), ResidualBlock(filters)]

    @tf.Module.with_name_scope
    def __call__(self, x):
        x = tf.nn.max_pool2d(self.conv(x), ksize=3, strides=2, padding="SAME")
        for block in self.blocks:
            x = block(x)
        return x


class ImpalaResNet(tf.Module):
    """IMPALA's "deep" network (Espeholt et al. 2018, Figure 3), as TorchBeast builds it.

    Three stages of 16, 32 and 32 channels, each a 3x3 convolution (stride 1, SAME), a
    3x3 max-pool with stride 2 (SAME: 84 -> 42 -> 21 -> 11) and two residual blocks;
    then ReLU, flatten, a dense layer of 256 with ReLU: [N, 84, 84, 4] -> [N, 256]. uint8
    frames are scaled to [0, 1] here.
    """

    def __init__(
        self, channels: Sequence[int] = (16, 32, 32), units: int = 256, name: str | None = None
    ):
        super().__init__(name=name)
        self.stages = [ResNetStage(filters) for filters in channels]
        self.dense = Linear(units, gain=np.sqrt(2))

    @tf.Module.with_name_scope
    def __call__(self, x):
        x = as_float(x)  # [N, H, W, C]
        for stage in self.stages:
            x = stage(x)
        x = tf.nn.relu(x)
        x = tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])  # [N, 11 * 11 * 32]
        return tf.nn.relu(self.dense(x))  # [N, units]


TORSOS = {"shallow": NatureConvNet, "deep": ImpalaResNet}
