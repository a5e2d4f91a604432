"""batchrl: in-graph, batched reinforcement learning on TensorFlow 2."""

__version__ = "0.1.0"
