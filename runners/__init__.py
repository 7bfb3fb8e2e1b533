"""How a trial runs: framework adapters, execution backends, the bench entry and the profiler."""
