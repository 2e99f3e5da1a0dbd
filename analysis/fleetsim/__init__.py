"""Fleet operations simulator (issue #33): many gang jobs on one fleet under the fitted
failure laws, with hot spares and warm standbys, automatic triage then a manual repair line,
lemon retirement and maintenance windows; estimates with CIs from replications and what-if
sweeps. ``scenario`` (schema, YAML), ``engine`` (one replication), ``run`` (inputs,
replications, stopping rule), ``sweep`` (knob sweeps, spare-sizing curve), ``closed_forms``
(the queueing and ETTR formulas the tests validate against).
"""
