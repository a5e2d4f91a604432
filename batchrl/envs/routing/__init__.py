"""Routing demands through an optical transport network: topologies, environments, heuristics."""

from batchrl.envs.routing.topology import Topology, load_topology, make_topology

__all__ = ["Topology", "load_topology", "make_topology"]
