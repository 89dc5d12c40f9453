"""Spark jobs: corpus preprocessing (`prep`) and workload generation (`workload_job`) with
the engine's own analyzer, on an embedded local Spark or a cluster (`session`)."""
