"""From the `models:` section of the config to the layer table and a per-model summary.

An entry is a built-in model (named by its key, or by `model:`) with integer options, or a user
module given by `factory: "package.module:callable"` plus its input shapes. Every model is built and
traced on the `meta` device, so the whole zoo takes seconds and no memory. Bad entries raise
`InputError` naming `models.<entry>.<key>`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import torch
from torch import nn

from relmas.errors import InputError
from relmas.zoo.extract import SUPPORTED_OPERATORS, UnattributedOperatorError, extract_layers
from relmas.zoo.registry import BUILTIN_MODELS, BuiltinModel

FACTORY_KEYS = ("factory", "input_shape", "input_shapes", "input_dtype", "kwargs")
INPUT_DTYPES = {"float": torch.float32, "long": torch.long}

Source = str | Path | None


def layer_table(models: Mapping[str, Mapping[str, Any]], source: Source = None) -> pl.DataFrame:
    """The layer table (LAYER_SCHEMA) of every configured model, in config order then layer."""
    if not models:
        raise InputError(source, "models", "at least one model")
    tables = []
    for name, options in models.items():
        module, inputs = build_model(name, options, source)
        tables.append(_trace(name, module, inputs, source))
    return pl.concat(tables, how="vertical")


def model_summary(
    models: Mapping[str, Mapping[str, Any]], layers: pl.DataFrame, source: Source = None
) -> pl.DataFrame:
    """Per model: layer count, total MACs and parameter count (counted on `meta`, not allocated)."""
    params = pl.DataFrame(
        {
            "model": list(models),
            "params": [
                sum(p.numel() for p in build_model(name, options, source)[0].parameters())
                for name, options in models.items()
            ],
        },
        schema={"model": pl.String(), "params": pl.Int64()},
    )
    totals = layers.group_by("model", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("layers"), pl.col("macs").sum().alias("macs")
    )
    return params.join(totals, on="model", how="left").select("model", "layers", "macs", "params")


def build_model(
    name: str, options: Mapping[str, Any] | None, source: Source = None
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The module (on `meta`, eval mode) and example inputs of one `models:` entry."""
    if options is not None and not isinstance(options, Mapping):
        raise InputError(source, f"models.{name}", "a mapping of model options", options)
    options = dict(options or {})
    with torch.device("meta"):
        if "factory" in options:
            module, inputs = _build_factory(name, options, source)
        else:
            module, inputs = _build_builtin(name, options, source)
    return module.to("meta").eval(), inputs


def _trace(
    name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], source: Source
) -> pl.DataFrame:
    try:
        table = extract_layers(module, inputs, name)
    except UnattributedOperatorError as exc:
        expected = f"MAC operators the layer extractor understands ({SUPPORTED_OPERATORS})"
        got = f"aten.{exc.operator} in module {exc.module!r}"
        raise InputError(source, f"models.{name}", expected, got) from exc
    except Exception as exc:  # any failure of the user's forward pass is a bad model entry
        raise InputError(
            source,
            f"models.{name}",
            "a model whose forward pass runs on its inputs",
            f"{type(exc).__name__}: {exc}",
        ) from exc
    if table.is_empty():
        raise InputError(source, f"models.{name}", "a model with a conv, linear or matmul operator")
    return table


# ------------------------------------------------------------------------------------------------
# Built-in models


def _build_builtin(
    name: str, options: dict[str, Any], source: Source
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    key = f"models.{name}.model" if "model" in options else f"models.{name}"
    builtin_name = options.pop("model", name)
    builtin = BUILTIN_MODELS.get(builtin_name) if isinstance(builtin_name, str) else None
    if builtin is None:
        expected = f"a built-in model ({', '.join(BUILTIN_MODELS)}) or a `factory:`"
        raise InputError(source, key, expected, builtin_name)
    resolved = _builtin_options(name, builtin_name, builtin, options, source)
    return builtin.build(resolved), builtin.inputs(resolved)


def _builtin_options(
    name: str, builtin_name: str, builtin: BuiltinModel, options: dict[str, Any], source: Source
) -> dict[str, int]:
    resolved = dict(builtin.defaults)
    for option, value in options.items():
        key = f"models.{name}.{option}"
        if option not in builtin.defaults:
            allowed = ", ".join(["model", *builtin.defaults])
            raise InputError(source, key, f"an option of {builtin_name} ({allowed})", option)
        maximum = builtin.maxima.get(option)
        _check_positive_int(value, key, source, maximum)
        resolved[option] = value
    return resolved


def _check_positive_int(value: Any, key: str, source: Source, maximum: int | None = None) -> None:
    in_range = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if maximum is not None:
        in_range = in_range and value <= maximum
    if not in_range:
        expected = "a positive integer" + (f" ≤ {maximum}" if maximum is not None else "")
        raise InputError(source, key, expected, value)


# ------------------------------------------------------------------------------------------------
# User modules


def _build_factory(
    name: str, options: dict[str, Any], source: Source
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    for option in options:
        if option not in FACTORY_KEYS:
            allowed = ", ".join(FACTORY_KEYS)
            raise InputError(source, f"models.{name}.{option}", f"a factory option ({allowed})")
    factory_key = f"models.{name}.factory"
    path = options["factory"]
    factory = _import_factory(path, factory_key, source)
    kwargs = options.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise InputError(source, f"models.{name}.kwargs", "a mapping of keyword arguments", kwargs)
    inputs = _factory_inputs(name, options, source)
    try:
        module = factory(**kwargs)
    except Exception as exc:  # the user's constructor rejected its kwargs or failed
        raise InputError(
            source,
            factory_key,
            f"a factory that builds with kwargs {dict(kwargs)}",
            f"{type(exc).__name__}: {exc}",
        ) from exc
    if not isinstance(module, nn.Module):
        raise InputError(
            source, factory_key, "a callable that returns a torch.nn.Module", type(module).__name__
        )
    return module, inputs


def _import_factory(path: Any, key: str, source: Source) -> Any:
    """Resolve `package.module:attr` (or `package.module.attr`) to the object it names."""
    expected = "a dotted path 'package.module:callable' to an importable callable"
    if not isinstance(path, str) or not path:
        raise InputError(source, key, expected, path)
    module_name, _, attribute = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attribute:
        raise InputError(source, key, expected, path)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # ModuleNotFoundError, or the user's module failing on import
        raise InputError(source, key, expected, f"{path} ({type(exc).__name__}: {exc})") from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InputError(source, key, f"a callable {attribute!r} in module {module_name}", path)
        target = getattr(target, part)
    if not callable(target):
        raise InputError(source, key, "a callable (class or function)", path)
    return target


def _factory_inputs(
    name: str, options: Mapping[str, Any], source: Source
) -> tuple[torch.Tensor, ...]:
    if ("input_shape" in options) == ("input_shapes" in options):
        raise InputError(source, f"models.{name}.input_shape", "exactly one of input_shape(s)")
    if "input_shape" in options:
        shapes, key = [options["input_shape"]], f"models.{name}.input_shape"
    else:
        shapes, key = options["input_shapes"], f"models.{name}.input_shapes"
        if not isinstance(shapes, list) or not shapes:
            raise InputError(source, key, "a non-empty list of shapes", shapes)
    dtype_name = options.get("input_dtype", "float")
    if dtype_name not in INPUT_DTYPES:
        expected = f"one of {', '.join(INPUT_DTYPES)}"
        raise InputError(source, f"models.{name}.input_dtype", expected, dtype_name)
    for shape in shapes:
        if not isinstance(shape, list) or not shape:
            raise InputError(source, key, "a non-empty list of positive integers", shape)
        for size in shape:
            _check_positive_int(size, key, source)
    dtype = INPUT_DTYPES[dtype_name]
    return tuple(torch.zeros(shape, dtype=dtype) for shape in shapes)
