"""Machine facts: NVML, CUDA toolkits, the host, and the probe that joins them."""
