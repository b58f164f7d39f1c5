"""divopt.experiments: metrics, certification, sweeps, benchmarks, plots, CLI, notebooks."""
