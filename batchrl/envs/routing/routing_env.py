"""The routing environment in NumPy, as a Gymnasium environment: the readable reference."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from batchrl.envs.routing.observation import (
    DEMANDS,
    MAX_DEMAND,
    make_observ,
    observation_space,
)
from batchrl.envs.routing.topology import Topology, load_topology


class RoutingEnv(gym.Env):
    """Route a stream of demands through an optical network, one candidate path each.

    Every directed link starts with the topology's capacity (200). Each step shows one
    demand (8, 32 or 64, uniform) between a uniform ordered pair of nodes s != t; the
    action picks one of its K candidate paths. If every link of the path has at least
    the demand left, the demand is debited from them for the rest of the episode, the
    reward is demand / 64 and the next demand is drawn. Otherwise the episode terminates
    with reward 0 and nothing is debited (the reference code debits the links before the
    full one, which makes no difference as the episode is over); the final observation
    shows the rejected demand again. No discount, no time limit (pass
    `max_episode_steps` to `gymnasium.make` for one), no masking of infeasible paths.
    The observation is the state; its layout is in `observation_space`, and
    `split_observ` undoes it. Each candidate path's links are `topology.incidence`.

    The state is public, as `env.unwrapped.state` is in classic control:

        capacities   float32 [L]  remaining capacity of each link
        demand       float        the current demand
        source       int          its source node
        destination  int          its destination node

    and `set_state` overwrites it.
    """

    metadata = {"render_modes": []}

    def __init__(self, topology: str | Topology = "nsfnet"):
        """Builds the environment.

        Args:
          topology: a `Topology`, or what `load_topology` loads ('nsfnet', 'geant2', a
            JSON file or a networkx graph).
        """
        if not isinstance(topology, Topology):
            topology = load_topology(topology)
        self.topology = topology
        self.observation_space = observation_space(topology)
        self.action_space = gym.spaces.Discrete(topology.k)
        self.capacities = np.full(topology.num_links, topology.capacity, np.float32)
        self.demand, self.source, self.destination = DEMANDS[0], 0, 1

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.capacities = np.full(self.topology.num_links, self.topology.capacity, np.float32)
        self._draw_demand()
        return self._observ(), {}

    def step(self, action: int):
        if not self.action_space.contains(action):
            raise ValueError(
                f"Invalid action {action!r}; valid actions are 0..{self.topology.k - 1}."
            )
        on_path = self.topology.incidence[self.source, self.destination, action] > 0  # [L]
        if (self.capacities[on_path] < self.demand).any():
            return self._observ(), 0.0, True, False, {}
        self.capacities[on_path] -= self.demand
        reward = self.demand / MAX_DEMAND
        self._draw_demand()
        return self._observ(), reward, False, False, {}

    def set_state(
        self, capacities: np.ndarray, demand: float, source: int, destination: int
    ) -> np.ndarray:
        """Overwrites the state; returns the observation of the new state.

        Args:
          capacities: the remaining capacity of each link [L].
          demand: the demand to route next.
          source: its source node.
          destination: its destination node, != source.
        """
        if source == destination:
            raise ValueError(f"source and destination must differ, got {source} for both.")
        self.capacities = np.array(capacities, np.float32)
        self.demand, self.source, self.destination = float(demand), int(source), int(destination)
        return self._observ()

    def _draw_demand(self) -> None:
        """Draws a uniform demand size and a uniform ordered pair of distinct nodes."""
        self.demand = DEMANDS[self.np_random.integers(len(DEMANDS))]
        source, destination = self.np_random.choice(self.topology.num_nodes, 2, replace=False)
        self.source, self.destination = int(source), int(destination)

    def _observ(self) -> np.ndarray:
        return make_observ(self.capacities, self.demand, self.source, self.destination)
