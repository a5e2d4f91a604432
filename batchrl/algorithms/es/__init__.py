"""Evolution strategies: a whole population evaluated as one batch inside the graph."""
