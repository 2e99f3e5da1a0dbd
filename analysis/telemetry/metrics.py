"""What the telemetry's metric names mean: ``CANONICAL_METRICS`` maps DCGM and nvidia-smi metric
names to covariate names (temp, power, util, fb_used) so analyses need not know the source;
``COUNTER_METRICS`` are the cumulative error counters whose rises are hardware events."""

from warehouse.schemas import XID_COUNT_METRIC

CANONICAL_METRICS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "temperature.gpu": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "power.draw": "power",
    "power.draw.average": "power",
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "utilization.gpu": "util",
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "memory.used": "fb_used",
}

# cumulative error counters -> (component_class, severity)
COUNTER_METRICS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("gpu_memory", "critical"),
    "ecc.errors.uncorrected.volatile.total": ("gpu_memory", "critical"),
    "ecc.errors.uncorrected.aggregate.total": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gpu_memory", "critical"),
    "remapped_rows.failure": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_RETIRED_DBE": ("gpu_memory", "warning"),
    "DCGM_FI_DEV_RETIRED_PAGES": ("gpu_memory", "warning"),
    "retired_pages.double_bit.count": ("gpu_memory", "warning"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("gpu_memory", "warning"),
    # dcgm-exporter's XIDs-in-a-window count, one series per code (metric name carries the code,
    # see ingest.formats.dcgm): a rise is a new XID of that code; a fall is the window moving on
    XID_COUNT_METRIC: ("gpu", "critical"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink", "critical"),
}
