"""BatchPPO: proximal policy optimization in the graph."""

from batchrl.algorithms.ppo import advantages, gsde, losses
from batchrl.algorithms.ppo.member_policy import MemberPolicy
from batchrl.algorithms.ppo.population import PopulationPPO
from batchrl.algorithms.ppo.ppo import PPO

PPO.population_class = PopulationPPO  # train.population > 1 trains one of these.

__all__ = ["PPO", "MemberPolicy", "PopulationPPO", "advantages", "gsde", "losses"]
