"""Sniffing: whether a file's head looks like Kubernetes objects or an operator log."""

import re

_K8S_KINDS = (
    rb"(Pod|PodList|List|Event|EventList|Node|NodeList|PyTorchJob|PyTorchJobList|JobSet|JobSetList)"
)


def detect(head: bytes, name: str) -> int:
    if re.search(rb'"kind"\s*:\s*"' + _K8S_KINDS + rb'"', head) and b'"apiVersion"' in head:
        return 90
    if re.search(rb"(?m)^kind:\s*" + _K8S_KINDS + rb"\s*$", head) and re.search(
        rb"(?m)^apiVersion:", head
    ):
        return 90
    if (
        re.search(rb"(?m)^\d{4}-\d\d-\d\dT\S+\t\w+\tevents\t", head)
        and b'"kind":"PyTorchJob"' in head
    ):
        return 70
    if re.search(rb'"(Status|status)"\s*:', head) and re.search(
        rb"PyTorchJob|training\.kubeflow\.org|JobSet", head
    ):
        return 70  # a PyTorchJob-like object, e.g. a vendor CLI's describe output
    return 0
