"""Scenarios -> job traces (JOB_SCHEMA): who sends which model when, with which deadline.

A scenario (config `scenarios.<name>`, keys in docs/simulator.md) names a model mix, tenants with
priorities, deadline slacks and shares of the jobs, an arrival process, the number of jobs and
optionally a system override. Traces are deterministic in (scenario, seed): the generator is
`numpy.random.default_rng([seed, stable hash of the scenario name])`, and the draws are made in a
fixed order (tenants, then models, then unit-rate arrival times) so that changing the load only
rescales time.

Load is relative to the system's *capacity*: the jobs per second the instances could complete if
every job ran whole on one instance, with the whole off-chip bandwidth to itself, and the work were
perfectly packed:
    capacity = sum over instances i of 1 / E_mix[alone latency of a job's model on i's type],
with each model's alone latency on a type the sum of its layers' alone latencies there
(`relmas.sim.costs`). The arrival rate is `load x capacity`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dataframely as dy
import numpy as np
import polars as pl

from relmas.errors import InputError
from relmas.io import read_parquet
from relmas.schemas import JOB_SCHEMA, max_jobs
from relmas.sim.costs import CostTables
from relmas.sim.system import System, load_system, override_system
from relmas.sim.times import MAX_TIME_S

# The keys of each arrival process (the schema lists the keys of all of them).
ARRIVAL_KEYS = {
    "poisson": ("process", "load"),
    "mmpp": ("process", "load", "burst_ratio", "burst_fraction", "mean_burst_jobs"),
    "trace": ("process", "path", "load"),
}
# The schema declares no defaults under `scenarios` (a default filled in there would change every
# scenario's config hash); these are the only ones, of keys only mmpp has.
MMPP_DEFAULTS = {"burst_ratio": 5.0, "burst_fraction": 0.2, "mean_burst_jobs": 20.0}


@dataclass(frozen=True)
class Tenant:
    name: str
    priority: int
    slack: float  # deadline = arrival + slack x isolated latency
    share: float  # fraction of the jobs (normalised over tenants)
    models: dict[str, float] | None  # own model mix, else the scenario's
    target: float | None = None  # deadline-hit-rate target of its jobs (None: no target)
    targets: Mapping[str, float] = field(default_factory=dict)  # per model, overriding `target`

    def job_target(self, model: str) -> float | None:
        """The target a job of `model` of this tenant carries (None: none)."""
        return self.targets.get(model, self.target)


@dataclass(frozen=True)
class Arrival:
    """Arrival process.

    poisson: exponential gaps at mean rate load x capacity.
    mmpp: two states (burst, calm); in the burst state the rate is `burst_ratio` times the calm
    one, the process spends `burst_fraction` of the time bursting and a burst brings
    `mean_burst_jobs` jobs on average; sojourns are exponential; mean rate load x capacity.
    trace: arrival times (and optionally `model`, `tenant` columns) replayed from a Parquet file,
    rescaled in time to a mean rate of load x capacity if `load` is given.
    """

    process: str
    load: float | None
    burst_ratio: float = MMPP_DEFAULTS["burst_ratio"]
    burst_fraction: float = MMPP_DEFAULTS["burst_fraction"]
    mean_burst_jobs: float = MMPP_DEFAULTS["mean_burst_jobs"]
    path: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    models: dict[str, float]
    tenants: tuple[Tenant, ...]
    arrival: Arrival
    slack_per_model: dict[str, float]
    jobs: int | None
    system: Mapping[str, Any] | None
    firm: bool = False  # drop a job once its deadline has passed (docs/simulator.md)

    def model_mix(self) -> dict[str, float]:
        """Probability of each model over all jobs (tenant shares x their mixes)."""
        total_share = sum(t.share for t in self.tenants)
        mix: dict[str, float] = {}
        for tenant in self.tenants:
            own = tenant.models if tenant.models is not None else self.models
            weight = sum(own.values())
            for model, w in own.items():
                mix[model] = mix.get(model, 0.0) + tenant.share / total_share * w / weight
        return mix

    def has_targets(self) -> bool:
        """Whether a tenant's jobs carry a deadline-hit-rate target (its own or a model's)."""
        return any(t.target is not None or t.targets for t in self.tenants)


def stable_hash(text: str) -> int:
    """A 64-bit hash of `text` that, unlike hash(), does not change between Python processes."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def scenario_system(
    config: Mapping[str, Any], name: str, source: str | Path | None = None
) -> System:
    """The config's default system with scenario `name`'s `system:` override merged onto it."""
    base = load_system(config["system"], source, key="system")
    override = config["scenarios"][name].get("system")
    if override is None:
        return base
    return override_system(base, override, source, f"scenarios.{name}.system")


def parse_scenario(
    name: str,
    raw: Mapping[str, Any],
    models: tuple[str, ...] | list[str],
    source: str | Path | None = None,
) -> Scenario:
    """Scenario `name` of a validated config (relmas.config: the schema's keys, types and ranges),
    after the checks the schema cannot express: the model names, unique tenant names, the keys of
    each arrival process and the ones it needs, a model mix where a tenant has none, finite
    numbers."""
    prefix = f"scenarios.{name}"
    arrival = _parse_arrival(raw["arrival"], source, f"{prefix}.arrival")
    tenants = _parse_tenants(raw["tenants"], models, source, f"{prefix}.tenants")
    # A replayed trace may name its models itself; a missing mix is then checked on generation.
    needs_mix = arrival.process != "trace" and any(t.models is None for t in tenants)
    mix = {}
    if "models" in raw or needs_mix:
        mix = _parse_mix(raw.get("models"), models, source, f"{prefix}.models")
    for i, tenant in enumerate(tenants):
        _check_targets(tenant, mix, source, f"{prefix}.tenants[{i}].targets")
    slack_key = f"{prefix}.deadline.slack_per_model"
    deadline = raw.get("deadline", {})
    slack_per_model = _parse_mix(deadline.get("slack_per_model", {}), models, source, slack_key)
    jobs = raw.get("jobs")
    if jobs is None and arrival.process != "trace":
        raise InputError(source, f"{prefix}.jobs", "a positive number of jobs", "missing")
    description = raw.get("description", "")
    return Scenario(
        name,
        description,
        mix,
        tenants,
        arrival,
        slack_per_model,
        jobs,
        raw.get("system"),
        firm=bool(deadline.get("firm", False)),
    )


def system_capacity(system: System, tables: CostTables, mix: Mapping[str, float]) -> float:
    """Jobs per second the system completes at best for model mix `mix` (see module docstring)."""
    total = sum(mix.values())
    expected = np.zeros(len(tables.types))
    for model, weight in mix.items():
        expected += weight / total * tables.model_latency_s[tables.model_index(model)]
    return float(sum(1.0 / expected[tables.types.index(name)] for name in system.instance_types))


def generate_trace(
    name: str,
    scenario: Mapping[str, Any] | Scenario,
    system: System,
    tables: CostTables,
    seed: int,
    source: str | Path | None = None,
) -> pl.DataFrame:
    """The job trace of scenario `name` for `seed`, on `system` with costs `tables` (JOB_SCHEMA)."""
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(name, scenario, tables.models, source)
    rng = np.random.default_rng([seed, stable_hash(name)])
    replay = _read_replay(scenario, tables, source) if scenario.arrival.process == "trace" else None
    count = scenario.jobs if replay is None else replay.height
    tenant_names = [t.name for t in scenario.tenants]
    if replay is not None and "tenant" in replay.columns:
        tenant_index = np.array([tenant_names.index(t) for t in replay["tenant"]], dtype=np.int64)
    else:
        shares = np.array([t.share for t in scenario.tenants])
        tenant_index = rng.choice(len(shares), size=count, p=shares / shares.sum())
    if replay is not None and "model" in replay.columns:
        models = np.array(replay["model"].to_list(), dtype=object)
        names, counts = np.unique(models.astype(str), return_counts=True)
        mix = {str(n): float(c) for n, c in zip(names, counts, strict=True)}
    else:
        if not scenario.models and any(t.models is None for t in scenario.tenants):
            key = f"scenarios.{name}.models"
            raise InputError(source, key, "a model mix (the replayed trace has no model column)")
        models = _draw_models(rng, scenario, tenant_index)
        mix = scenario.model_mix()
    if replay is None:
        rate = scenario.arrival.load * system_capacity(system, tables, mix)
        arrivals = _unit_rate_arrivals(rng, scenario.arrival, count) / rate
    else:
        arrivals = replay["arrival_s"].to_numpy()
        if scenario.arrival.load is not None and count > 1:
            rate = scenario.arrival.load * system_capacity(system, tables, mix)
            span = arrivals[-1] - arrivals[0]
            arrivals = arrivals[0] + (arrivals - arrivals[0]) * ((count - 1) / rate / span)
    isolated = np.array([tables.isolated_latency(m) for m in models])
    tenant_slack = np.array([t.slack for t in scenario.tenants])[tenant_index]
    slack = np.array(
        [scenario.slack_per_model.get(m, s) for m, s in zip(models, tenant_slack, strict=True)]
    )
    priority = np.array([t.priority for t in scenario.tenants], dtype=np.int32)[tenant_index]
    owners = [scenario.tenants[i] for i in tenant_index]
    target = [t.job_target(str(m)) for t, m in zip(owners, models, strict=True)]
    model_target = [str(m) in t.targets for t, m in zip(owners, models, strict=True)]
    return pl.DataFrame(
        {
            "job_id": np.arange(count, dtype=np.int64),
            "tenant": [tenant_names[i] for i in tenant_index],
            "model": [str(m) for m in models],
            "arrival_s": arrivals,
            "deadline_s": arrivals + slack * isolated,
            "priority": priority,
            "target": target,
            "model_target": model_target,
            "firm": np.full(count, scenario.firm),
        },
        schema=JOB_SCHEMA,
    )


def _draw_models(rng: np.random.Generator, scenario: Scenario, tenant_index: np.ndarray):
    models = np.empty(tenant_index.size, dtype=object)
    for i, tenant in enumerate(scenario.tenants):
        mix = tenant.models if tenant.models is not None else scenario.models
        names = list(mix)
        weights = np.array([mix[n] for n in names])
        mine = tenant_index == i
        models[mine] = np.array(names, dtype=object)[
            rng.choice(len(names), size=int(mine.sum()), p=weights / weights.sum())
        ]
    return models


def _unit_rate_arrivals(rng: np.random.Generator, arrival: Arrival, count: int) -> np.ndarray:
    """Arrival times of a process with mean rate 1 (divide by the target rate)."""
    if arrival.process == "poisson":
        return np.cumsum(rng.exponential(1.0, count))
    ratio, fraction = arrival.burst_ratio, arrival.burst_fraction
    calm_rate = 1.0 / (1.0 + fraction * (ratio - 1.0))
    rates = (ratio * calm_rate, calm_rate)
    burst_time = arrival.mean_burst_jobs / rates[0]
    mean_sojourn = (burst_time, burst_time * (1.0 - fraction) / fraction)
    state = 0 if rng.random() < fraction else 1
    times: list[np.ndarray] = []
    start, total = 0.0, 0
    while total < count:
        length = rng.exponential(mean_sojourn[state])
        k = rng.poisson(rates[state] * length)
        times.append(start + np.sort(rng.uniform(0.0, length, k)))
        total += k
        start += length
        state = 1 - state
    return np.concatenate(times)[:count]


class Arrivals(dy.Schema):
    """A replayed trace (`arrival: {process: trace, path: ...}`): its arrival times, optionally
    `model` and `tenant` columns (checked against the scenario's) and any others (ignored)."""

    arrival_s = dy.Float64(min=0, max=MAX_TIME_S)


def _read_replay(scenario: Scenario, tables: CostTables, source: str | Path | None) -> pl.DataFrame:
    path = scenario.arrival.path
    frame = read_parquet(path, Arrivals, max_rows=max_jobs())
    frame = frame.sort("arrival_s", maintain_order=True)
    times = frame["arrival_s"].to_numpy()
    if scenario.arrival.load is not None and frame.height > 1 and times[-1] == times[0]:
        raise InputError(path, "arrival_s", "arrivals spread over time, to rescale to a load")
    tenants = [t.name for t in scenario.tenants]
    for column, allowed in (("model", tables.models), ("tenant", tenants)):
        if column in frame.columns:
            bad = frame.filter(~pl.col(column).cast(pl.String).is_in(list(allowed)))
            if bad.height:
                raise InputError(path, column, f"one of {list(allowed)}", bad[column][0])
            frame = frame.with_columns(pl.col(column).cast(pl.String))
    if scenario.jobs is not None:
        if scenario.jobs > frame.height:
            key = f"scenarios.{scenario.name}.jobs"
            raise InputError(
                source, key, f"at most the {frame.height} jobs of {path}", scenario.jobs
            )
        frame = frame.head(scenario.jobs)
    return frame


# ----------------------------------------------------------------------------- validation


def _known_keys(raw: Mapping, allowed, source, prefix: str) -> None:
    unknown = sorted(str(k) for k in set(raw) - set(allowed))
    if unknown:
        raise InputError(source, f"{prefix}.{unknown[0]}", f"a known key (one of {list(allowed)})")


def _finite(value: float, source, key: str) -> float:
    """`value` as a float, if finite (YAML has .inf and .nan; the schema checks the sign)."""
    if not math.isfinite(value):
        raise InputError(source, key, "a finite number", value)
    return float(value)


def _parse_mix(raw: Mapping[str, float] | None, models, source, key: str) -> dict[str, float]:
    """A mapping model -> number (a mix's weights, slacks or targets) of configured models."""
    if raw is None:
        raise InputError(source, key, "a model mix {model: weight}", "missing")
    result = {}
    for model, value in raw.items():
        if model not in models:
            raise InputError(
                source, f"{key}.{model}", f"one of the configured models {list(models)}"
            )
        result[str(model)] = _finite(value, source, f"{key}.{model}")
    return result


def _parse_tenants(raw: list[Mapping[str, Any]], models, source, key: str) -> tuple[Tenant, ...]:
    tenants = []
    for i, entry in enumerate(raw):
        here = f"{key}[{i}]"
        if entry["name"] in (t.name for t in tenants):
            raise InputError(
                source, f"{here}.name", "a name not used by another tenant", entry["name"]
            )
        own = entry.get("models")
        target = entry.get("target")
        tenants.append(
            Tenant(
                name=entry["name"],
                priority=int(entry["priority"]),
                slack=_finite(entry["slack"], source, f"{here}.slack"),
                share=_finite(entry["share"], source, f"{here}.share"),
                models=None if own is None else _parse_mix(own, models, source, f"{here}.models"),
                target=None if target is None else _finite(target, source, f"{here}.target"),
                targets=_parse_mix(entry.get("targets", {}), models, source, f"{here}.targets"),
            )
        )
    return tuple(tenants)


def _check_targets(tenant: Tenant, scenario_mix: Mapping[str, float], source, key: str) -> None:
    """A per-model target names a model the tenant sends: one of its own mix, else of the
    scenario's (a replayed trace without a mix names its models itself: any configured one)."""
    mix = tenant.models if tenant.models is not None else scenario_mix
    for model in tenant.targets:
        if mix and model not in mix:
            expected = f"a model of tenant {tenant.name}'s mix {list(mix)}"
            raise InputError(source, f"{key}.{model}", expected)


def _parse_arrival(raw: Mapping[str, Any], source, key: str) -> Arrival:
    process = raw["process"]
    _known_keys(raw, ARRIVAL_KEYS[process], source, key)
    load = raw.get("load")
    if load is None and process != "trace":
        raise InputError(source, f"{key}.load", "a positive load (fraction of capacity)", "missing")
    load = None if load is None else _finite(load, source, f"{key}.load")
    if process == "trace":
        if "path" not in raw:
            expected = "the path of a Parquet file of arrivals"
            raise InputError(source, f"{key}.path", expected, "missing")
        return Arrival(process, load, path=raw["path"])
    if process == "poisson":
        return Arrival(process, load)
    params = {
        name: _finite(raw.get(name, default), source, f"{key}.{name}")
        for name, default in MMPP_DEFAULTS.items()
    }
    return Arrival(process, load, **params)
