"""Sniffing: whether a file's head looks like a training job's log with step lines."""

import re

_STEP = re.compile(
    rb"elapsed time per iteration \(ms\)|train_step_timing in s|\bstep:\s*\d+(?:/\d+)?\s+loss:"
)
_SIGNATURE = re.compile(
    rb"time across ranks \(ms\):|GPU (?:relative|individual) performance:|"
    rb"time \(ms\) \| forward|\[NeMo [IWE] |\[titan\] |-+ arguments -+"
)


def detect(head: bytes, name: str) -> int:
    """Two step lines or more: a training log (above the checkpoint format's 70, so a log with
    both is read for its steps, and its saves with them). One step line, or only the
    frameworks' other signatures: below it, so that a file the checkpoint format recognises by
    its saves stays its."""
    steps = len(_STEP.findall(head, 0, len(head)))
    if steps >= 2:
        return 85
    return 60 if steps or _SIGNATURE.search(head) else 0
