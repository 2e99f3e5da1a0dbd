"""The non-NVIDIA faults the kernel reports, by the code the kernel parser gives each line: its
event type, component class and severity (XIDs get theirs from ``ingest.xid_catalog``).

A catalog of its own, outside the parser, so that the synthetic fleet (``sample_data``, which
may not import a parser) files the lines it writes under the same classes."""

# code -> (event_type, class, severity)
HOST_FAULTS = {
    "mlx5_link_down": ("link_down", "ib_link", "critical"),
    "mlx5_port_module_error": ("link_down", "ib_link", "critical"),
    "mce": ("mce", "cpu", "fatal"),
    "mce_corrected": ("mce", "cpu", "info"),
    "edac_ue": ("edac", "host_memory", "fatal"),
    "nvme_controller_down": ("nvme", "storage", "fatal"),
}
