"""What every `relmas` subcommand does before its stage's work: load the configs it is given and
check the paths of its options (each output distinct from its inputs, path templates filled in).

Bad input ends as an InputError naming the file, the key and what was expected (relmas.cli turns
it into one line on stderr and exit status 2).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from relmas.errors import InputError
from relmas.paths import cost_table, piece_table


def load_configs(paths: Sequence[str]) -> dict[str, Any]:
    """Load one or several config files, merged left to right like Snakemake's `--configfile`.

    Also checks the scenarios that sweeps and generalisation pairs name, which relmas.config
    cannot (relmas.study, which plans them, may not import it): every command and the Snakefile
    refuse an unknown one alike, not only the stages that run them."""
    from relmas.config import merge_into, validate_config
    from relmas.study import generalisation_runs, sweep_points
    from relmas.yaml_load import load_yaml

    merged: dict[str, Any] = {}
    for path in paths:
        raw = load_yaml(path)
        if not isinstance(raw, Mapping):
            raise InputError(path, None, "a mapping of configuration keys", type(raw).__name__)
        merge_into(merged, raw)
    source = ", ".join(paths)
    config = validate_config(merged, source)
    generalisation_runs(config, source)
    sweep_points(config, source)
    return config


def check_distinct_outputs(
    inputs: Mapping[str, Iterable[str | Path | None]],
    outputs: Mapping[str, Iterable[str | Path | None]],
) -> None:
    """Refuse an output path that is one of the command's inputs or another of its outputs.

    Writing it would replace a file the command reads or writes, and the command would still
    succeed: a layer table replaced by its cost table, a trace by its results, results by a chart.
    Paths compare resolved (relative spellings, `..` and symbolic links lead to the same file),
    before anything is read or written. Both mappings go from the option that gave the paths (or
    what they are) to the paths; None stands for an option left out.
    """
    owners: dict[str, str] = {}
    for option, paths in inputs.items():
        for path in paths:
            if path is not None:
                owners.setdefault(os.path.realpath(path), option)
    for option, paths in outputs.items():
        for path in paths:
            if path is None:
                continue
            resolved = os.path.realpath(path)
            if resolved in owners:
                expected = f"a path that is not also {owners[resolved]} ({resolved})"
                raise InputError(path, option, expected)
            owners[resolved] = option


def cost_inputs(costs: Path, accelerators: Iterable[str]) -> list[Path]:
    """A --costs directory and the tables a command may read in it (cost and piece tables)."""
    names = list(accelerators)
    return [costs, *(cost_table(costs, n) for n in names), *(piece_table(costs, n) for n in names)]


def directory_inputs(directory: Path | None) -> list[Path]:
    """A directory read as a whole (a trained agent) and the files in it."""
    if directory is None or not directory.is_dir():
        return [directory] if directory is not None else []
    return [directory, *sorted(directory.iterdir())]


def check_repeated(
    option: str, values: Sequence[object], field: str, templates: Mapping[str, object]
) -> None:
    """The values of a repeatable option (`--seed`, `--policy`): each once, and with several of
    them every path template given (option -> template, None when left out) names `{field}`, so
    that no output is written twice."""
    if len(set(values)) < len(values):
        raise InputError(None, option, f"each {field} once", " ".join(map(str, values)))
    if len(values) > 1:
        for flag, template in templates.items():
            if template is not None and "{" + field + "}" not in str(template):
                raise InputError(
                    None, flag, f"a path with '{{{field}}}' when several {option} are given"
                )


def fill_template(option: str, template: str, **fields: object) -> str:
    """A path template of an option with its placeholders filled in (a stray brace is an error)."""
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError):
        names = ", ".join("{" + name + "}" for name in fields)
        raise InputError(
            None, option, f"a path whose only placeholders are {names}", template
        ) from None
