"""Common names of component kinds in exports (RMA, CMDB, failure logs) mapped to the docs/design.md
taxonomy (``warehouse.schemas.COMPONENT_CLASSES``); parsers look a lower-cased name up here and
keep a name not listed as given."""

CLASS_NAMES = {
    "gpu": "gpu",
    "gpus": "gpu",
    "hbm": "gpu_memory",
    "hbm3": "gpu_memory",
    "gpu memory": "gpu_memory",
    "dimm": "host_memory",
    "dram": "host_memory",
    "memory": "host_memory",
    "ram": "host_memory",
    "psu": "psu",
    "power supply": "psu",
    "fan": "cooling",
    "fans": "cooling",
    "ssd": "storage",
    "nvme": "storage",
    "disk": "storage",
    "drive": "storage",
    "hdd": "storage",
    "nic": "nic",
    "hca": "nic",
    "infiniband": "ib_link",
    "ib": "ib_link",
    "nvlink": "nvlink",
    "nvswitch": "nvswitch",
    "driver": "host_os",
    "kernel": "host_os",
    "bmc": "bmc",
    "cpu": "cpu",
    "processor": "cpu",
    # HPE Hardware State Manager component types (the first part of a FRUID)
    "nodeaccel": "gpu",
    "nodeenclosurepowersupply": "psu",
    "nodehsnnic": "nic",
}
