"""The Slurm backend: trials as Slurm jobs submitted through slurmrestd (``docs/slurm.md``).

``settings`` reads ``ATTUNE_SLURM_*``, ``client`` speaks slurmrestd's REST API (the versions the
server offers), ``api`` parses its answers, ``jobdesc`` renders a launch as a batch job,
``placement`` spreads runs over nodes, ``backend`` is the ``Backend`` the executor drives.
"""
