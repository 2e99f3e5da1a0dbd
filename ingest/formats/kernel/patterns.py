"""The regexes that read a kernel log line: the candidate literals, the stamp/host prefix of
every supported layout, and the fields of each fault line."""

import re

# Literals every record line contains (one regex alternation of them is the prefilter before the
# field regexes run).
CANDIDATE_LITERALS = [
    "NVRM: Xid", "NVRM: GPU at", "SXid", "SXID", "Link down", "Port module event[error]",
    "Machine Check Exception", "Machine check events logged", "context corrupt", " UE ",
    "controller is down", "setting system clock to", "Linux version ",
]  # fmt: skip

MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?"
DELTA = r"<\s*[-+]?\d+\.\d+>"  # dmesg --show-delta / --time-format=delta: gap to the previous line
# The stamp/host head of a line; the body is the rest (sliced off, not captured: capturing
# ``.*$`` would walk every line through the slow capture engine). One alternative per stamp:
# dmesg --ctime, raw uptime (journald short-monotonic adds a host), delta only, reltime minute
# header and ``+delta`` lines, /dev/kmsg, RFC 5424, ISO (dmesg --time-format=iso, journald
# short-iso[-precise], rsyslog RFC 3339), journald short-unix, RFC 3164 / journald short[-precise];
# dmesg --decode puts ``kern  :warn  : `` before any of them.
PREFIX = (
    r"^(?P<head>(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:"
    r"\[(?P<ctime>[A-Z][a-z]{2} +"
    + MONTH
    + r" +\d{1,2} \d\d:\d\d:\d\d \d{4})(?: "
    + DELTA
    + r")?\]"
    r"|\[\s*(?P<up>\d+\.\d+)(?: " + DELTA + r")?\](?: (?P<mhost>\S+) kernel:)?"
    r"|\[(?P<dlt>" + DELTA + r")\]"
    r"|\[(?P<rmon>" + MONTH + r") ?(?P<rday>\d{1,2}) (?P<rhm>\d\d:\d\d)\]"
    r"|\[\s*(?P<rdelta>\+\d+\.\d+)\]"
    r"|\d+,\d+,(?P<kmsg>\d+),[^;]*;"
    r"|1 (?:(?P<iso5>" + ISO + r")(?P<off5>Z|[+-]\d\d:\d\d)|-) (?P<h5>\S+) \S+ \S+ \S+ "
    r"(?:-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: \x{FEFF}?)?"
    r"|(?P<iso>" + ISO + r")(?P<off>Z|[+-]\d\d:?\d\d)?(?: (?P<ihost>\S+) kernel:)?"
    r"|(?P<unix>\d{9,11}\.\d{1,6}) (?P<uhost>\S+) kernel:"
    r"|(?P<sys>" + MONTH + r" +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?) (?P<shost>\S+) kernel:"
    r")?\s*(?:kernel:\s*)?(?:\[\s*(?P<up2>\d+\.\d+)\]\s*)?)"
)
PREFIX_GROUPS = [
    "ctime", "up", "mhost", "dlt", "rmon", "rday", "rhm", "rdelta", "kmsg", "iso5", "off5", "h5",
    "iso", "off", "ihost", "unix", "uhost", "sys", "shost", "up2",
]  # fmt: skip
# dmesg --time-format=reltime prints ``[Jan21 04:41]`` when the minute changes and ``[  +0.000123]``
# (gap to the previous line) otherwise: a ``+`` line's minute is that of the header above it.
REL_HEADER = re.compile(
    rb"(?m)^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?\[("
    + MONTH.encode()
    + rb") ?(\d{1,2}) (\d\d:\d\d)\]"
)
REL_FIRST = re.compile(
    rb"^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?\[(?:\s*\+\d|" + MONTH.encode() + rb" ?\d)"
)
PCI = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"
# What follows ``NVRM: Xid`` (split off as a literal: a leading ``.*`` or a trailing ``(.*)$``
# capture would run every line through the slow capture engine); the message is the rest.
XID = (
    r"^(?P<head> \((?:PCI:)?(?P<pci>" + PCI + r")\):? (?P<code>\d+)\b,?\s*"
    r"(?:pid=(?P<pid>'[^']*'|\"[^\"]*\"|<[^>]*>|[^,\s]*),\s*)?(?:name=(?P<pname><[^>]*>|[^,]*),\s*)?)"
)
SXID = (
    r"(?P<dev>nvidia-nvswitch\d+): SX[Ii][Dd](?:=|\s*\((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\):\s*)"
    r"(?P<code>\d+)\b,?\s*(?P<msg>.*)$"
)
MLX5 = r"mlx5_core (?P<pci>" + PCI + r")(?: (?P<ifname>[^:\s]+))?: (?P<msg>.*)$"
MCE = r"mce: \[Hardware Error\]: (?P<msg>.*)$"
EDAC = r"EDAC (?P<mc>[^:]+): (?P<n>\d+) (?P<kind>UE) (?P<msg>.*)$"
NVME = r"nvme (?P<dev>nvme\d+): (?P<msg>controller is down.*)$"
GPU_AT = r"NVRM: GPU at (?:PCI:)?(?P<pci>" + PCI + r"): (?P<uuid>GPU-[0-9a-fA-F-]+)"
# The boot banner that dates uptime stamps: the RTC driver sets the clock early in boot.
CLOCK = r"setting system clock to \S+ UTC \((?P<epoch>\d+)\)"
LINK = r"(?i)\blink (-?\d+)|\bEngine instance (\d+)"
