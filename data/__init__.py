"""divopt.data: corpora loaders, embeddings with a cache, candidate pools, synthetic generators."""
