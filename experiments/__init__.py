"""divopt_rag.experiments: metrics, certification, sweeps, benchmarks, plots, CLI, notebooks."""
