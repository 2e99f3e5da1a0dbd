"""Fleet operations simulator (issues #33, #43): many gang jobs on one fleet under the fitted
failure laws, with hot spares, warm standbys and job standbys, bad nodes, diagnosis, automatic
triage then a manual repair line with silent failures, retirement and maintenance windows,
slots and fixed-work jobs with a queue and backfill; estimates with CIs that carry the fits'
uncertainty, and what-if sweeps. ``scenario`` (schema, YAML), ``engine`` (one replication,
with ``nodes``, ``jobs``, ``repair``, ``streams`` and ``metrics``), ``run`` (inputs,
replications, stopping rule, CI split), ``sweep`` (knob sweeps, spare-sizing curve),
``estimate`` (keys estimated from the warehouse), ``airesim`` (AIReSim's configuration as a
scenario), ``closed_forms`` (the formulas the tests validate against).
"""
