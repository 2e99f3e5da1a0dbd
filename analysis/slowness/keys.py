"""The keys of a job and of one of its slow periods, shared by the slowness modules."""

JOB = ["cluster", "job_id"]
KEYS = [*JOB, "period"]
