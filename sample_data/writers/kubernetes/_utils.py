"""What the Kubernetes writers share: timestamps, uids and container ids as the API server writes
them, and the image and operator the simulated jobs run."""

from __future__ import annotations

import hashlib
import time

from sample_data.model import Fleet


def k8s_time(f: Fleet, t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(round(f.start_epoch + t)))


def uid(*parts) -> str:
    h = hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def cid(*parts) -> str:
    """containerd container id: 64 hex digits, stable for the same inputs."""
    return "containerd://" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"


OPERATOR = "pytorchjob-controller"
