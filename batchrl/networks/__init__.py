"""Networks as `tf.Module`s: MLPs, Atari ConvNets, recurrent cells, heads, their factory.

Also the graph network for routing and the stacked networks (`stacked.py`,
`stacked_recurrent.py`): M parameter vectors as one batch, which an ES generation or a
PPO population evaluates in one product per layer (`PopulationMLP`, `PopulationRecurrent`).
Networks build their variables on first call and know nothing of environments,
algorithms or runners: the graph network reads graphs and their features, which an
environment's `GraphFeatures` makes of its observations.
"""

from batchrl.networks.convnets import ImpalaResNet, NatureConvNet
from batchrl.networks.factory import (
    is_recurrent,
    make_core_network,
    make_network,
    make_shared_body_network,
    make_torso,
)
from batchrl.networks.heads import PolicyHead, StateDependentNoiseHead
from batchrl.networks.mlp import (
    ACTIVATIONS,
    MLP,
    Conv2D,
    Linear,
    SharedBodyNetwork,
    WithFeatures,
    as_float,
    batch_apply,
)
from batchrl.networks.recurrent import CoreNetwork, GRUCell, LSTMCell, RecurrentNetwork
from batchrl.networks.stacked import PopulationMLP, PopulationNetwork, action_size, to_action
from batchrl.networks.stacked_recurrent import PopulationRecurrent

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "WithFeatures",
    "Conv2D",
    "CoreNetwork",
    "GRUCell",
    "ImpalaResNet",
    "LSTMCell",
    "Linear",
    "NatureConvNet",
    "PolicyHead",
    "StateDependentNoiseHead",
    "RecurrentNetwork",
    "SharedBodyNetwork",
    "as_float",
    "batch_apply",
    "is_recurrent",
    "make_core_network",
    "make_network",
    "make_shared_body_network",
    "make_torso",
    "PopulationMLP",
    "PopulationNetwork",
    "PopulationRecurrent",
    "action_size",
    "to_action",
]
