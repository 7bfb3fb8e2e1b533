"""The pure decision core: models, registry, pre/post-launch gates, noise, budget and the ledger.

Nothing in this package imports ``bot`` or ``runners``; the ledger is its only I/O.
"""
