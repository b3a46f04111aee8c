"""relmas: reproducible multi-tenant DNN scheduling on heterogeneous multi-accelerator systems."""

__version__ = "0.1.0"
