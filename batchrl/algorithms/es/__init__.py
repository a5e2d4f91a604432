"""Evolution strategies: a whole population evaluated as one batch inside the graph."""

from batchrl.algorithms.es.es import (
    ES,
    GenerationTrainer,
    PopulationEvaluator,
    PopulationPolicy,
    Strategy,
)

__all__ = ["ES", "GenerationTrainer", "PopulationEvaluator", "PopulationPolicy", "Strategy"]
