"""A Dagster webserver over a goodput home, for the UI test and the UI benchmark: `dagster dev`
(webserver, daemon and runs) or `dagster-webserver` alone, serving ``pipelines.definitions``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.servers.slurm import poll

LOCATION = "pipelines.definitions"  # the code location `-m` names
REPO = Path(__file__).resolve().parents[2]


def start(command: list[str], home: Path, port: int, **popen) -> subprocess.Popen:
    """``command`` (``["dagster", "dev"]`` or ``["dagster-webserver"]``, from this Python's
    environment) on 127.0.0.1:PORT over ``home`` (its Dagster instance in HOME/.dagster), in a
    session of its own: the code server (and dev's daemon) are its children, so signalling the
    group stops them all. Returns once it answers (loading the code location is slow)."""
    env = {**os.environ, "DAGSTER_HOME": str(home / ".dagster"), "GOODPUT_HOME": str(home)}
    binary = str(Path(sys.executable).parent / command[0])
    server = subprocess.Popen(
        [binary, *command[1:], "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        start_new_session=True,
        **popen,
    )

    def answering() -> bool:
        assert server.poll() is None, f"{command[0]} exited with status {server.returncode}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        poll(" ".join(command), answering, deadline_s=600, every=0.5)
    except BaseException:  # never answered: nothing of it is left running
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        raise
    return server
