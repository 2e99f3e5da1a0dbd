"""Time lost while jobs run slow: one module per question.

* ``steps``: per job, from its logged step times (``training_steps``), its healthy baseline, the
  periods it ran slower, their slowdown and slow GPU-hours, transient or persistent, and the
  rank the log blames (``job_step_times``, ``slow_periods``).
* ``pipeline_model`` and ``whatif``: from a per-operation trace of one job (ByteDance's layout),
  the slowdown without stragglers and its split between single workers and stage imbalance.
"""
