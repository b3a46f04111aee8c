"""Structure rules of the package: one catalog of policies, no import cycle, short functions, and a
DAG that is planned without Numba."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from relmas import catalog
from relmas.config import load_schema

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "relmas"
WORKFLOW = [ROOT / "Snakefile", ROOT / "workflow" / "Snakefile"]
WORKFLOW += sorted((ROOT / "workflow" / "rules").glob("*.smk"))
WORKFLOW += [ROOT / "workflow" / "schemas" / "config.schema.yaml"]


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """relmas modules that `name` imports anywhere (module level or in a function), except under
    `if TYPE_CHECKING:`. `from package import submodule` counts as the submodule only."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(modules)
            found.update(submodules or {base})

    Visitor().visit(ast.parse(path.read_text()))
    return {module for module in found if module in modules and module != name}


def test_relmas_has_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycle = trail[trail.index(name) :] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


MAX_FUNCTION_LINES = 100


def test_no_function_is_longer_than_100_lines() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_the_schema_enums_are_the_catalog() -> None:
    schema = load_schema()
    evaluation = schema["properties"]["evaluation"]["properties"]
    assert evaluation["policies"]["items"]["enum"] == list(catalog.names())
    observation = schema["properties"]["training"]["properties"]["observation"]
    reference = observation["properties"]["reference"]["enum"]
    assert reference == [catalog.BEST, *catalog.teachers()]
    assert reference[0] == observation["properties"]["reference"]["default"]


def test_every_kind_and_options_section_is_known() -> None:
    schema_evaluation = load_schema()["properties"]["evaluation"]["properties"]
    for entry in catalog.entries():
        assert entry.kind in catalog.KINDS
        assert entry.options is None or entry.options in schema_evaluation
        assert entry.base is None or catalog.entry(entry.base) is not None
    assert len(set(catalog.names())) == len(catalog.names())


# Where the word is not a policy: the package's own name (program, default MLflow experiment).
NOT_POLICIES = {("relmas/cli.py", "relmas"), ("relmas/tracking.py", "relmas")}


def _string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    ]


def test_only_the_catalog_and_each_implementation_name_policies() -> None:
    names = set(catalog.names())
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if relative == "relmas/catalog.py":
            continue
        for line, value in _string_literals(ast.parse(path.read_text())):
            if value not in names or (relative, value) in NOT_POLICIES:
                continue
            if catalog.implementation(value) != module:  # a policy names itself where defined
                found.append(f"{relative}:{line} {value!r}")
    alternatives = "|".join(sorted(names, key=len, reverse=True))
    quoted = re.compile(rf"""["']({alternatives})["']""")
    listed = re.compile(rf"\[[^\]]*\b({alternatives})\b[^\]]*\]")
    for path in WORKFLOW:
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if quoted.search(text) or (path.suffix == ".yaml" and listed.search(text)):
                found.append(f"{path.relative_to(ROOT)}:{number} {text.strip()}")
    assert not found, found


def _workflow_imports() -> list[str]:
    """The relmas modules the Snakefile and its rules import while the DAG is planned."""
    pattern = re.compile(
        r"^\s*from (relmas[\w.]*) import \(?\s*(\w+)|^\s*import (relmas[\w.]*)", re.M
    )
    modules = set()
    for path in WORKFLOW:
        for match in pattern.finditer(path.read_text()):
            package, name, module = match.groups()
            modules.add(module or (f"relmas.{name}" if package == "relmas" else package))
    return sorted(modules)


def test_planning_the_dag_loads_neither_numba_nor_torch() -> None:
    imports = _workflow_imports()
    assert {"relmas.catalog", "relmas.paths", "relmas.study"} <= set(imports)
    script = f"""
import importlib, sys
for name in {imports!r}:
    importlib.import_module(name)
from relmas.cli import load_configs
from relmas import study
from relmas.workload import scenario_system
for name in ("config/config.yaml", "config/quick.yaml"):
    config = load_configs([name])
    study.evaluation_runs(config), study.generalisation_runs(config), study.sweep_points(config)
    [scenario_system(config, scenario) for scenario in config["scenarios"]]
print(sorted(m for m in ("numba", "torch", "mlflow") if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


# --- adding a policy: one class (tests/toy_policy.py) plus one catalog entry ----------------------

TOY = catalog.PolicyEntry("newest_first", "heuristic", "tests.toy_policy")
# Runs a command line (`relmas ...` or `snakemake ...`) with TOY added to the catalog.
WITH_TOY = f"""
import sys
from relmas import catalog
catalog.CATALOG += (catalog.{TOY!r},)
if sys.argv[1] == "snakemake":
    from snakemake.cli import main
else:
    from relmas.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_policy_in_the_catalog_alone_runs_through_relmas_evaluate(tmp_path, monkeypatch):
    import polars as pl
    import yaml

    from relmas.cli import main
    from relmas.config import config_hash, load_config
    from relmas.hw.spec import parse_spec, spec_hash
    from relmas.io import write_parquet
    from relmas.profile import (
        COST_MODEL_VERSION,
        META_MODELS_HASH,
        META_OBJECTIVE,
        META_SPEC_HASH,
        META_VERSION,
    )
    from relmas.schemas import JOB_SCHEMA
    from tests.synthetic import synthetic_costs

    monkeypatch.setattr(catalog, "CATALOG", (*catalog.CATALOG, TOY))
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    config = {key: quick[key] for key in ("accelerators", "system")}
    tenants = [{"name": "u", "priority": 3, "slack": 4.0, "share": 1}]
    config["models"] = {"a": {}, "b": {}}
    scenario = {
        "tenants": tenants,
        "models": {"a": 1, "b": 1},
        "arrival": {"process": "poisson", "load": 0.5},
        "jobs": 3,
    }
    config["scenarios"] = {"toy": scenario}
    config["evaluation"] = {"seeds": [1], "policies": ["fcfs", TOY.name]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    costs = synthetic_costs({"a": 4, "b": 6}, list(quick["accelerators"]), seed=2)
    models = config_hash(load_config(tmp_path / "config.yaml")["models"])
    for (name,), part in costs.group_by("accelerator"):
        spec = parse_spec(name, quick["accelerators"][name], None)
        stamp = {META_VERSION: COST_MODEL_VERSION, META_SPEC_HASH: spec_hash(spec)}
        stamp |= {META_OBJECTIVE: "latency", META_MODELS_HASH: models}  # as relmas profile
        write_parquet(part, tmp_path / "costs" / f"{name}.parquet", metadata=stamp)
    jobs = {
        "job_id": [10, 11, 12],
        "tenant": ["u", "u", "u"],
        "model": ["a", "b", "a"],
        "arrival_s": [0.0, 0.0, 0.0],
        "deadline_s": [1.0, 1.0, 1.0],
        "priority": [3, 3, 3],
    }
    write_parquet(pl.DataFrame(jobs, schema_overrides=JOB_SCHEMA), tmp_path / "trace.parquet")
    for policy in ("fcfs", TOY.name):
        args = ["evaluate", "--config", str(tmp_path / "config.yaml"), "--scenario", "toy"]
        args += ["--policy", policy, "--seed", "1", "--jobs", str(tmp_path / "trace.parquet")]
        args += ["--costs", str(tmp_path / "costs"), "--out", str(tmp_path / f"{policy}.parquet")]
        assert main(args) == 0
    summary = pl.read_parquet(tmp_path / f"{TOY.name}.summary.parquet")
    assert summary["policy"].to_list() == [TOY.name]
    last = {  # three jobs at once on two instances: the one left for later
        policy: pl.read_parquet(tmp_path / f"{policy}.parquet").sort("start_s")["job_id"][-1]
        for policy in ("fcfs", TOY.name)
    }
    assert last == {"fcfs": 12, TOY.name: 10}


def test_a_policy_in_the_catalog_alone_is_planned_into_the_dag(tmp_path):
    """Dry run (`snakemake -n`) of the quick config with the toy policy evaluated."""
    import yaml

    override = {"evaluation": {"policies": ["fcfs", TOY.name]}, "sweeps": {}}
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(override))
    command = [sys.executable, "-c", WITH_TOY, "snakemake", "-n", "-p", "--forceall"]
    command += ["--configfile", "config/quick.yaml", str(tmp_path / "toy.yaml")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert f"--policy {TOY.name} --seed 1000" in output
    assert f"results/quick/eval/mixed/{TOY.name}/seed1000.summary.parquet" in output


def test_the_project_cites_only_its_own_files() -> None:
    """docs/design.md is the contracts' one reference; nothing points outside the repository."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = [ROOT / name for name in tracked if name.endswith((".py", ".md", ".smk", ".yaml"))]
    texts += WORKFLOW
    bad = re.compile(r"\bDESIGN\.md|\.\./shared|shared/DESIGN")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in texts
        if path.is_file() and path.name != "test_architecture.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert not found, found
    assert (ROOT / "docs" / "design.md").is_file()


# The engine state's layout (relmas.sim.engine_kernels): column constants, job states, and the
# State arrays they index. Private to relmas.sim: everything else reads the state through
# relmas.sim.access.
STATE_ARRAYS = {"jf", "ji", "af", "ai", "sf", "si", "tc", "jt"}


def _state_layout_names() -> set[str]:
    from relmas.sim import engine_kernels

    layout = re.compile(
        r"^((JF|JI|AF|AI|SF|SI|TC)_\w+|JOB_(FUTURE|READY|RUNNING|DONE|DROPPED)|\w+_COLUMNS)$"
    )
    return {name for name in vars(engine_kernels) if layout.match(name)}


def test_only_relmas_sim_reads_the_engine_states_layout() -> None:
    """A module outside relmas/sim/ that names a state column (or indexes the State's arrays)
    breaks when the layout changes: it must use relmas.sim.access (or the engine's methods)."""
    names = _state_layout_names()
    assert {"SI_RECORD", "SI_NEXT_ARRIVAL", "JF_DEADLINE", "JOB_READY", "SI_COLUMNS"} <= names
    assert {"TC_MET", "JI_TENANT", "JOB_DROPPED"} <= names
    sources = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
    sources += sorted((ROOT / "workflow").rglob("*.py"))
    found = []
    for path in sources:
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("relmas/sim/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            used = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            used += [node.id] if isinstance(node, ast.Name) else []
            used += [node.attr] if isinstance(node, ast.Attribute) else []
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
                used += [f".{node.value.attr}[]"] if node.value.attr in STATE_ARRAYS else []
            found += [f"{relative}:{node.lineno} {name}" for name in used if name in names]
            found += [f"{relative}:{node.lineno} {name}" for name in used if name.endswith("[]")]
    assert not found, found


# Imports every relmas module with jit_cache.refresh recorded: per kernel, the modules whose caches
# it keeps, and the modules of the jitted functions it calls, directly or through others (by the
# names its code reads: a global function, or a module's attribute).
REFRESHED = """
import importlib, json, pkgutil, sys, types
from numba.core.registry import CPUDispatcher
import relmas
from relmas.hw import jit_cache
listed, refresh = {}, jit_cache.refresh
def record(kernel, modules, **options):
    modules = list(modules)
    listed[kernel] = [module.__name__ for module in modules]
    refresh(kernel, modules, **options)
jit_cache.refresh = record
for module in pkgutil.walk_packages(relmas.__path__, "relmas."):
    if module.name != "relmas.__main__":
        importlib.import_module(module.name)
from relmas.hw import search
search._refresh_caches_once()
def names(code):
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= names(const)
    return found
def callees(kernel):
    used = names(kernel.py_func.__code__)
    for name in used:
        value = kernel.py_func.__globals__.get(name)
        if isinstance(value, types.ModuleType):
            for attribute in used:
                if isinstance(getattr(value, attribute, None), CPUDispatcher):
                    yield getattr(value, attribute)
        elif isinstance(value, CPUDispatcher):
            yield value
def embedded(kernel):
    seen, todo = {kernel}, [kernel]
    while todo:
        for callee in callees(todo.pop()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return {function.py_func.__module__ for function in seen}
missing = {
    f"{kernel.py_func.__module__}.{kernel.__name__}": sorted(embedded(kernel) - set(modules))
    for kernel, modules in listed.items()
}
refreshed = sorted({name for modules in listed.values() for name in modules})
print(json.dumps({"refreshed": refreshed, "missing": missing}))
"""


@pytest.fixture(scope="module")
def refreshed() -> dict:
    import json

    run = subprocess.run(
        [sys.executable, "-c", REFRESHED], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(run.stdout.splitlines()[-1])


def test_every_module_with_cached_kernels_is_refreshed_when_its_sources_change(refreshed) -> None:
    """Numba checks a cached kernel against its own file only, and cannot even read the index of
    one whose argument types moved to another module: every module with `cache=True` kernels is
    one that a `jit_cache.refresh` hashes and clears (with the modules its kernels call)."""
    cached = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if "cache=True" in path.read_text()
    }
    assert cached - set(refreshed["refreshed"]) == set()


def test_a_cached_kernel_is_refreshed_when_a_function_it_calls_changes(refreshed) -> None:
    """A cached caller embeds the compiled code of what it calls: its refresh must hash every
    module of a jitted function it reaches (a kernel that missed the keeper's module ran a stale
    training loop after the keeper changed)."""
    assert {kernel: m for kernel, m in refreshed["missing"].items() if m} == {}
