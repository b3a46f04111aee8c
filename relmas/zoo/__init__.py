"""Real DNN definitions (torch `nn.Module`) and their layer tables, traced on the `meta` device."""

from relmas.zoo.extract import UnattributedOperatorError, extract_layers
from relmas.zoo.registry import BUILTIN_MODELS, BuiltinModel
from relmas.zoo.table import build_model, layer_table, model_summary

__all__ = [
    "BUILTIN_MODELS",
    "BuiltinModel",
    "UnattributedOperatorError",
    "build_model",
    "extract_layers",
    "layer_table",
    "model_summary",
]
