"""The Kubeflow training-operator log: its restart lines, each a quarantined record."""

import json
import re

from ingest.base import ParseContext

from .common import timestamp

_OPLOG = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\S+)\t\w+\tevents\t(?P<msg>[^\t]*)\t(?P<json>\{.*\})\s*$"
)


def operator_log(text: str, ctx: ParseContext) -> list[tuple[int, str, str]]:
    """``PyTorchJobRestarting`` lines of a training-operator log, each one quarantine row: the
    line ends a failed attempt but the log never shows when that attempt started (it records
    restarts, not starts), so the attempt cannot be measured from it; the reason names the
    attempt's end and exit code and where its start is found."""
    bad = []
    exit_codes: dict[str, int] = {}
    for i, line in enumerate(text.split("\n"), start=1 + ctx.line_offset):
        m = _OPLOG.match(line)
        if not m:
            continue
        try:
            info = json.loads(m["json"])
            obj = info["object"]
            job = f"{obj.get('namespace') or 'default'}/{obj['name']}"
            reason = info.get("reason")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            if "Restarting" in line:
                bad.append((i, line, f"unreadable operator event: {exc!r}"))
            continue
        code = re.search(r"exited with code (-?\d+)", m["msg"])
        if code:
            exit_codes[job] = int(code.group(1))
        if reason != "PyTorchJobRestarting":
            continue
        end = timestamp(m["ts"])
        if end is None:
            bad.append((i, line, f"unreadable timestamp {m['ts']!r}"))
            continue
        ec = f" (exit code {exit_codes[job]})" if job in exit_codes else ""
        why = (f"{reason} at {end:%Y-%m-%dT%H:%M:%S} ends an attempt of {job}{ec} whose start an "
               "operator log does not show: the job's pod events or pods (kubectl get events/pods "
               "-o json) give it")  # fmt: skip
        bad.append((i, line, why))
    return bad


def looks_like_oplog(text: str) -> bool:
    return bool(re.search(r"^\d{4}-\d\d-\d\dT\S+\t\w+\tevents\t", text[:65536], re.MULTILINE))
