"""A real Slurm cluster for tests: munge, MariaDB, slurmdbd, slurmctld and four slurmd
(``gpu001``-``gpu004``, 2 CPUs and 8 GPUs each, all on this host), private to one temp dir.

Everything is its own: a munge key and socket, a MariaDB datadir on a loopback port, free ports
for slurmdbd, slurmctld and each slurmd, and ``slurm.conf`` / ``slurmdbd.conf`` read through
``SLURM_CONF`` (``SlurmCluster.env``), so two pytest-xdist workers each get a cluster of their own
and nothing touches the host's ``/etc/slurm`` or ``/run/munge``. Daemons run in the foreground
as children of the test process (``-D`` / ``-F``) and are stopped on teardown (and sent SIGTERM
if the test process dies). Settings for a fast job mix: ``sched/builtin`` scheduling every
second, ``MinJobAge=2``, ``KillWait=1``, ``cred_expire=5`` (a requeued job may start again after
about 6 s, not 121), ``ReturnToService=1`` (a node an admin set down stays down). A TIMEOUT
still takes 60-90 s: time limits are whole minutes and slurmctld checks them every 30 s
(``PERIODIC_TIMEOUT``, not configurable). Needs root (``SlurmUser=root``) and Debian's ``slurm-wlm
slurmdbd mariadb-server munge``; without them the fixture skips, or fails when ``CI`` is set.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest

NODES = ("gpu001", "gpu002", "gpu003", "gpu004")
GPUS_PER_NODE = 8
# Typed, as on nearly every GPU cluster: accounting then lists each job's GPUs twice, as the
# untyped total (gres/gpu) and per type (gres/gpu:h100)
GPU_TYPE = "h100"
BINARIES = (
    "munged",
    "mungekey",
    "mariadb-install-db",
    "mysqld",
    "mariadb",
    "slurmdbd",
    "slurmctld",
    "slurmd",
    "sacct",
    "sacctmgr",
    "sbatch",
    "scontrol",
    "sinfo",
)
START_DEADLINE_S = 180.0  # generous: the machine is shared with other test workers


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the test process dies, even by SIGKILL, so a
    killed test run leaves no daemons behind (Linux prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports nobody listens on right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def poll(
    what: str,
    ready,
    deadline_s: float = START_DEADLINE_S,
    every: float = 0.2,
    log: Path | None = None,
):
    """Call ``ready()`` until it returns a truthy value (returned) or the deadline passes."""
    end = time.monotonic() + deadline_s
    while True:
        got = ready()
        if got:
            return got
        if time.monotonic() > end:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} not ready within {deadline_s:g} s\n{tail}")
        time.sleep(every)


@dataclass
class SlurmCluster:
    root: Path
    name: str
    conf: Path
    ports: dict[str, int]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        out = subprocess.run(
            args,
            check=False,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )
        if check and out.returncode:
            raise RuntimeError(f"{' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
        return out

    def sbatch(self, *args: str) -> str:
        """Submit a batch job; its job id."""
        out = self.run("sbatch", "--parsable", "-o", "/dev/null", "-e", "/dev/null", *args)
        return out.stdout.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False)
        for tok in out.stdout.split():
            if tok.startswith("JobState="):
                return tok.split("=", 1)[1]
        return "GONE" if out.returncode else "UNKNOWN"

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        return dict(line.split() for line in out.stdout.splitlines() if line.strip())

    # -- daemons -----------------------------------------------------------------------------
    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.root / "log" / f"{name}.out", "ab") as log:
            p = subprocess.Popen(
                args,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - tests start daemons from one thread
            )
        self.procs[name] = p
        return p

    def _alive(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is not None:
            out = (self.root / "log" / f"{name}.out").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{name} exited {p.returncode} while starting:\n{out}")

    def stop(self, name: str, wait_s: float = 30) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def start_slurmdbd(self) -> None:
        self._spawn("slurmdbd", "slurmdbd", "-D")

        def answers():
            self._alive("slurmdbd")
            return (
                self.run(
                    "sacctmgr", "-n", "-P", "show", "cluster", check=False, timeout=30
                ).returncode
                == 0
            )

        poll("slurmdbd", answers, log=self.root / "log" / "slurmdbd.log")

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop(name)


def _write_configs(c: SlurmCluster, db_password: str) -> None:
    r, p = c.root, c.ports
    host = socket.gethostname()
    munge = f"socket={r}/munge/munge.socket"
    # cred_expire: how long a requeued job waits before it may start again (120 s by default)
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p[n]} CPUs=2 "
        f"Gres=gpu:{GPU_TYPE}:{GPUS_PER_NODE} State=UNKNOWN"
        for n in NODES
    )
    (r / "etc" / "slurm.conf").write_text(f"""\
ClusterName={c.name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={p["slurmctld"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo={munge},cred_expire=5
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={p["slurmdbd"]}
AccountingStoragePass={r}/munge/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:{GPU_TYPE}
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MinJobAge=2
KillWait=1
OverTimeLimit=0
InactiveLimit=0
ReturnToService=1
SlurmdTimeout=300
MessageTimeout=30
{nodes}
PartitionName=gpu Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
    (r / "etc" / "gres.conf").write_text(
        f"NodeName={NODES[0][:3]}[{NODES[0][3:]}-{NODES[-1][3:]}] Name=gpu Type={GPU_TYPE} "
        f"File={r}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"
    )
    dbd = r / "etc" / "slurmdbd.conf"
    dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo={munge}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={p["slurmdbd"]}
SlurmUser=root
PidFile={r}/run/slurmdbd.pid
LogFile={r}/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={p["mysql"]}
StorageUser=slurm
StoragePass={db_password}
StorageLoc=slurm_acct_db
""")
    dbd.chmod(0o600)


def start_cluster(root: Path) -> SlurmCluster:
    """Start every daemon; the cluster with all four nodes idle. Stops what it started on
    failure."""
    root.chmod(0o755)  # munged wants its socket's directory searchable by all
    for d in ("etc", "munge", "db", "state", "spool", "run", "log", "dev", "work"):
        (root / d).mkdir()
    (root / "munge").chmod(0o755)
    for i in range(GPUS_PER_NODE):
        (root / "dev" / f"nvidia{i}").touch()
    names = ("mysql", "slurmdbd", "slurmctld", *NODES)
    c = SlurmCluster(
        root,
        f"t{secrets.token_hex(3)}",
        root / "etc" / "slurm.conf",
        dict(zip(names, free_ports(len(names)))),
    )
    password = secrets.token_hex(8)
    _write_configs(c, password)
    try:
        _start(c, password)
    except BaseException:
        c.stop_all()
        raise
    return c


def _start(c: SlurmCluster, password: str) -> None:
    r = c.root
    key = r / "munge.key"
    subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, capture_output=True)
    sock = r / "munge" / "munge.socket"
    c._spawn(
        "munged",
        "munged",
        "-F",
        f"--socket={sock}",
        f"--key-file={key}",
        f"--pid-file={r}/run/munged.pid",
        f"--log-file={r}/log/munged.log",
        f"--seed-file={r}/run/munged.seed",
    )
    poll("munged", lambda: (c._alive("munged"), sock.exists())[1])

    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={r}/db",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    mysock = r / "run" / "mysql.sock"
    c._spawn(
        "mysqld",
        "mysqld",
        "--no-defaults",
        f"--datadir={r}/db",
        f"--socket={mysock}",
        f"--port={c.ports['mysql']}",
        "--bind-address=127.0.0.1",
        "--user=root",
        f"--pid-file={r}/run/mysqld.pid",
        f"--log-error={r}/log/mysqld.err",
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=64M",
        "--innodb-flush-log-at-trx-commit=0",
        "--innodb-lock-wait-timeout=900",
        "--skip-log-bin",
    )
    sql = ["mariadb", "--no-defaults", f"--socket={mysock}", "-uroot"]

    def db_up():
        c._alive("mysqld")
        return (
            subprocess.run([*sql, "-e", "SELECT 1"], check=False, capture_output=True).returncode
            == 0
        )

    poll("mysqld", db_up, log=r / "log" / "mysqld.err")
    subprocess.run(
        [
            *sql,
            "-e",
            (
                f"CREATE DATABASE slurm_acct_db; CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY "
                f"'{password}'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
            ),
        ],
        check=True,
        capture_output=True,
    )

    c.start_slurmdbd()
    c.run("sacctmgr", "-i", "add", "cluster", c.name)

    c._spawn("slurmctld", "slurmctld", "-D", "-i")

    def ctld_up():
        c._alive("slurmctld")
        return c.run("scontrol", "ping", check=False, timeout=30).stdout.count("UP") > 0

    poll("slurmctld", ctld_up, log=r / "log" / "slurmctld.log")
    for n in NODES:
        (r / "spool" / n).mkdir()
        c._spawn(f"slurmd-{n}", "slurmd", "-D", "-N", n)

    def registered():
        for n in NODES:
            c._alive(f"slurmd-{n}")
        states = c.node_states()
        return len(states) == len(NODES) and all(
            "unknown" not in s and "not_responding" not in s and "*" not in s
            for s in states.values()
        )

    poll("slurmd", registered, log=r / "log" / "slurmctld.log")
    c.run("scontrol", "update", f"nodename={','.join(NODES)}", "state=resume", check=False)
    poll(
        "idle nodes",
        lambda: all(s == "idle" for s in c.node_states().values()),
        log=r / "log" / "slurmctld.log",
    )


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running cluster for one test module (see the module docstring)."""
    missing = missing_binaries()
    if os.geteuid() != 0 or missing:
        why = "needs root" if os.geteuid() != 0 else f"missing {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"real Slurm cluster: {why}")
        pytest.skip(f"real Slurm cluster: {why}")
    root = Path(tempfile.mkdtemp(prefix="slurm-"))
    c = start_cluster(root)
    try:
        yield c
    finally:
        c.stop_all()
        shutil.rmtree(root, ignore_errors=True)
