"""The synthetic fleet's default size and settings, for ``build_fleet`` and ``goodput simulate``
alike. A module of plain numbers, so the CLI reads them without importing the simulator."""

NODES = 32
GPUS_PER_NODE = 8  # an HGX H100 board (``model.GPU_PCI_BUS``)
DAYS = 60.0
SEED = 0
FAULT_SCALE = 20.0  # times the Llama 3 fault rates: enough failures in a small fleet to fit
SCRAPE_INTERVAL_S = 3600  # DCGM scrapes once an hour
# fail-slow episodes (sample_data.fail_slow) per 1,000 GPU-days: a setting that shows slowness
# in a small fleet, not a published rate
FAIL_SLOW_RATE = 2.0
STEP_LOG_S = 120.0  # a training job logs its step time about every 2 minutes
