"""GPU telemetry derived tables, one module per concern:

- ``rollups``: the daily derived tables, recomputed only for the date partitions whose
  ``gpu_samples`` (or ``gpu_rollups``) files are newer than them, one day at a time out of
  core: ``gpu_hourly``, ``gpu_daily``, ``gpu_counter_changes``, ``gpu_sightings``,
  ``gpu_sample_times``; and what is read from them whole (GPU presence, samples per hour).
- ``covariates``: the lifetime covariates' SQL over ``gpu_hourly`` and ``gpu_daily``.
- ``counters``: ``hw_events`` (``source='dcgm_counter'``) from rises of cumulative error
  counters.
- ``replacements``: ``component_history`` (``source='telemetry'``) from UUID changes.

``metrics`` names what the telemetry's metrics mean (covariates, error counters); ``sql`` holds
what their DuckDB SQL is built from.
"""
