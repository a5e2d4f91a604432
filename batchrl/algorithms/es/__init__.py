"""Evolution strategies: a whole population evaluated as one batch inside the graph.

`strategy.py` holds the search distribution and its optimizer (`ask`, `tell`),
`generation.py` a generation's members acting and scored as one batch, `es.py` the
algorithm and its trainer; the math as pure functions: `fitness.py` (rank shaping),
`gradient.py` (the mirrored estimate, L2, Adam), `noise.py` (each member's noise).
"""

from batchrl.algorithms.es.es import ES, GenerationTrainer
from batchrl.algorithms.es.generation import PopulationEvaluator, PopulationPolicy
from batchrl.algorithms.es.strategy import Strategy

__all__ = ["ES", "GenerationTrainer", "PopulationEvaluator", "PopulationPolicy", "Strategy"]
