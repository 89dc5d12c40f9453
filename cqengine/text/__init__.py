"""Text in: the one analyzer (terms and term ids), TREC reading and writing, and the
synthetic corpora and query workloads the experiments, the demo and the benchmarks use."""
