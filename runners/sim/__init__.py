"""The simulated GPU cluster (``--backend sim``): no training runs; each launch writes the
framework's own log lines and traces from a hidden truth (``runners.sim.truth``), so attune's
real parser, checks, judgement, ledger and report run unchanged. See docs/sim.md."""
