"""Sniffing: whether a file's head looks like a kernel log."""

import re

_SNIFF_XID = re.compile(rb"NVRM: Xid|nvidia-nvswitch\d+: SX[Ii][Dd]")
_SNIFF_LINE = re.compile(
    rb"(?m)^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:\[\s*\d+\.\d+(?: <[^>]*>)?\] |"
    rb"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?: <[^>]*>)?\] |"
    rb"\d+,\d+,\d+,[-c+]*;|\[[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d\] |\[\s*\+\d+\.\d+\] |"
    rb"\S+ +\S+ \S+ \S+ kernel: |1 \S+ \S+ kernel |"
    rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:\d\d |"
    rb"(?:\d{4}-\d\d-\d\dT|\d{9,11}\.)\S+ \S+ kernel: )"
)


def detect(head: bytes, name: str) -> int:
    """Kernel logs: any XID/SXID line is decisive; otherwise most lines must carry a
    dmesg / kmsg / syslog-kernel prefix."""
    if _SNIFF_XID.search(head):
        return 90
    lines = [ln for ln in head.split(b"\n")[:200] if ln.strip()]
    if not lines:
        return 0
    hits = sum(
        1 for ln in lines if _SNIFF_LINE.match(ln)
    )  # per sniffed line (<= 200), not per record
    return 60 if hits >= 0.8 * len(lines) else 0
