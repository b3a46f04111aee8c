"""Event-driven simulation of multi-tenant DNN inference on a multi-accelerator system.

The names below are imported on first use, so that importing `relmas.sim.system` (e.g. to plan
the DAG) does not compile or load the Numba engine.
"""

import importlib

_EXPORTS = {
    "CostTables": "relmas.sim.costs",
    "read_cost_tables": "relmas.sim.costs",
    "DecisionView": "relmas.sim.engine",
    "Engine": "relmas.sim.engine",
    "JOB_RESULT_SCHEMA": "relmas.sim.result",
    "SimResult": "relmas.sim.result",
    "Instance": "relmas.sim.system",
    "System": "relmas.sim.system",
    "load_system": "relmas.sim.system",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
