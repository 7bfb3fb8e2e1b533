"""The embedded workload: a small GPT (optionally MoE) trained for real on the CPU."""
