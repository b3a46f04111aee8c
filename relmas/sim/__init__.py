"""Event-driven simulation of multi-tenant DNN inference on a multi-accelerator system."""

from relmas.sim.costs import CostTables, read_cost_tables
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.result import JOB_RESULT_SCHEMA, SimResult
from relmas.sim.system import Instance, System, load_system

__all__ = [
    "JOB_RESULT_SCHEMA",
    "CostTables",
    "DecisionView",
    "Engine",
    "Instance",
    "SimResult",
    "System",
    "load_system",
    "read_cost_tables",
]
