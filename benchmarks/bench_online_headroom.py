"""The online headroom (issue 50, item 1): what a scheduler that does not know the future can win
by giving jobs up, measured by the sampled-futures planner (relmas.policies.planner) against the
study's best baseline, paired per trace.

    .venv/bin/python benchmarks/bench_online_headroom.py [--config config/config.yaml]
        [--costs DIR] [--validation DIR] [--scenarios vision_heavy,bursty] [--seeds 1000,1001]
        [--jobs 0] [--samples 2] [--horizon 40] [--keep-share 0.5] [--lp-time-limit 2]
        [--bandwidth-share 1] [--schedules planner,oracle,agent,clairvoyant] [--tune 1]
        [--planned-by RULE@PLACEMENT|agent]

Per scenario: its best baseline and the placed rule the planner schedules with (unless
`--planned-by` names another; `agent`: the study's `relmas` agent's teacher at its placement, the
rule its keeper gives jobs up beside) are those the study chose on its validation traces
(`--validation`, the `relmas validate` files of a study run: results/<study>/validation). Per
evaluation seed (`--seeds`, default the first two of `evaluation.seeds`), one trace of the scenario
with `--jobs` jobs (the scenario's own when 0, as the study's: shorter traces end before the queue
builds up, docs/relmas.md) runs the best baseline and the schedules of `--schedules`:

- `planner`: the planner over `--samples` futures of `--horizon` arrivals, keeping at
  `--keep-share`, its LPs planning with `--bandwidth-share` of the bandwidth;
- `oracle`: the planner fed the trace's own next `--horizon` arrivals (what knowing them is
  worth to it);
- `agent`: the study's `relmas` agent of the scenario (results/<study>/agents), on the same
  traces: how much of the planner's headroom the microsecond policy takes;
- `clairvoyant`: the LP's jobs of the whole trace served by the placed rule alone (`lp_once`), by
  the one deadline rule and placement that serves them best over the scenario's traces
  (`lp_fixed`, chosen on those traces), as the bound stage serves them (`served`: the best of the
  deadline rules x placements x `evaluation.ceiling.admission_bandwidth`, chosen per trace after
  the fact), and the best of those rules x placements on every job, chosen per trace after the
  fact too (`rules_after`).

Prints one row per trace, then per scenario the mean SLA rates, each schedule's paired mean
difference to the best baseline in SLA points with its Student-t 95 % interval, the mean target
shortfalls where the tenants have service targets, and the planners' seconds per plan. With `--tune
N`, the planner's knobs are first chosen per scenario on N of its validation traces
(`training.validation_seeds`, `--jobs` jobs): the options' own and each one-knob change of
VARIATIONS, the first by the least mean shortfall where the tenants have targets, then the highest
mean SLA rate (the order the study chooses its best baseline by).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import polars as pl
from command_line import (  # a sibling module
    AGENT_POLICY,
    AGENT_RULE,
    add_validated_study,
    print_table,
    run,
    study_agent,
    study_choices,
    validated_study,
)

from relmas.ceiling.admission import (
    ADMITTED,
    Run,
    deadline_rules,
    placements,
    replayed,
    serve_lp_jobs,
)
from relmas.ceiling.bound import relaxation_bound
from relmas.ceiling.instance import Instance
from relmas.errors import InputError
from relmas.evaluate import placement_option, simulate
from relmas.policies import make_policy
from relmas.policies.planner import PlannerConfig, RealFuture, SampledFutures, planner
from relmas.report.stats import mean_ci
from relmas.study import Study, validation_order


def planner_config(args: argparse.Namespace, seed: int) -> PlannerConfig:
    return PlannerConfig(
        samples=args.samples,
        horizon_jobs=args.horizon,
        keep_share=args.keep_share,
        lp_time_limit_s=args.lp_time_limit,
        bandwidth_share=args.bandwidth_share,
        seed=seed,
    )


CLAIRVOYANT_LP_S = 60.0  # the LP of a whole trace, as the bound stage's default
CLAIRVOYANT = ("lp_once", "lp_fixed", "served", "rules_after")
SCHEDULES = ("planner", "oracle", "agent", "clairvoyant")
# What `--tune` tries beside the options' own knobs, one change at a time.
VARIATIONS = ({"keep_share": 0.25}, {"keep_share": 0.75}, {"bandwidth_share": 0.8})


def planner_run(
    study: Study, scenario: str, costs: str | None, placed: tuple[str, str], jobs, config
) -> dict:
    """The planner's run metrics on `jobs` with `config`, scheduling with `placed` (rule, where)."""
    system, tables = study.system(scenario), study.costs(scenario, costs)
    rule, where = placed
    futures = SampledFutures(scenario, study.scenario(scenario), system, tables, config)
    policy = planner(make_policy(rule, placement=where), futures, config)
    return simulate(system, jobs, tables, policy).metrics


def tuned(study: Study, scenario: str, rule: str, where: str, args: argparse.Namespace):
    """The planner's knobs chosen on `--tune` validation traces of `scenario`
    (`training.validation_seeds`): the options' own and each of VARIATIONS, the first in the
    order the study chooses its best baseline by (`validation_order`: the least mean shortfall
    where the tenants have targets, then the highest mean SLA rate)."""
    base = planner_config(args, 0)
    if not args.tune:
        return base
    seeds = study.config["training"]["validation_seeds"][: args.tune]
    traces = study.traces(scenario, seeds, args.costs, args.jobs or None).values()
    configs = [base, *(replace(base, **change) for change in VARIATIONS)]
    rows = []
    for k, config in enumerate(configs):
        for jobs in traces:
            metrics = planner_run(study, scenario, args.costs, (rule, where), jobs, config)
            rows.append({"config": k} | {m: metrics.get(m) for m in ("sla_rate", "shortfall")})
    order = validation_order(pl.DataFrame(rows), "config")
    for k, config in enumerate(configs):
        print(f"{scenario} validation {config}: (shortfall, -SLA rate) {order[k]}", flush=True)
    return configs[min(order, key=lambda k: (order[k], k))]


def measure(study: Study, scenario: str, args: argparse.Namespace) -> list[dict]:
    """One row per trace of `scenario`: the SLA rates (and shortfalls, where the tenants have
    targets) of the best baseline, the planners and the study's agent."""
    choices = study_choices(study, scenario, args, args.planned_by)
    system, tables, best, placements = (
        choices.system,
        choices.tables,
        choices.best,
        choices.placements,
    )
    rule, where = choices.rule, choices.where
    chosen = tuned(study, scenario, rule, where, args)
    rows = []
    for seed, jobs in study.traces(scenario, args.seeds, args.costs, args.jobs or None).items():
        baseline = simulate(
            system, jobs, tables, make_policy(best, **placement_option(best, placements))
        )
        config = replace(chosen, seed=seed)
        futures = SampledFutures(scenario, study.scenario(scenario), system, tables, config)
        planners = {}
        if "planner" in args.schedules:
            planners["planner"] = planner(make_policy(rule, placement=where), futures, config)
        if "oracle" in args.schedules:
            oracle = RealFuture(args.horizon)  # one future: every sample would be the same
            once = replace(config, samples=1)
            planners["oracle"] = planner(make_policy(rule, placement=where), oracle, once)
        row = dict(
            scenario=scenario,
            seed=seed,
            jobs=jobs.height,
            best=best,
            planned_by=f"{rule}@{where}",
            knobs=f"H{config.horizon_jobs} q{config.keep_share} bw{config.bandwidth_share}",
            best_sla=float(baseline.metrics["sla_rate"]),
        ) | shortfall("best", baseline.metrics)
        if "agent" in args.schedules:
            agent = study_agent(study, scenario)
            learned = make_policy(AGENT_POLICY, seed=seed, agent=agent)
            metrics = simulate(system, jobs, tables, learned).metrics
            row |= {"agent_sla": float(metrics["sla_rate"])} | shortfall("agent", metrics)
        for name, policy in planners.items():
            started = time.perf_counter()
            result = simulate(system, jobs, tables, policy)
            row |= {
                f"{name}_sla": float(result.metrics["sla_rate"]),
                f"{name}_given_up": policy.given_up,
                f"{name}_s_per_plan": (time.perf_counter() - started) / max(policy.plans, 1),
            } | shortfall(name, result.metrics)
        if "clairvoyant" in args.schedules:
            scales = study.config["evaluation"]["ceiling"]["admission_bandwidth"]
            row |= clairvoyant(system, tables, jobs, (rule, where), scales)
        print(row, flush=True)
        rows.append(row)
    return rows


def shortfall(name: str, metrics) -> dict:
    """`{name}_shortfall`, the run's service-target shortfall in points, where the scenario's
    tenants have targets (service_levels: what its best baseline is chosen by)."""
    value = metrics.get("shortfall")
    return {} if value is None else {f"{name}_shortfall": 100 * float(value)}


def clairvoyant(system, tables, jobs, placed: tuple[str, str], scales) -> dict:
    """The SLA rates of the LP's jobs served on the whole trace (relmas.ceiling.admission):
    `lp_once` by the placed rule `placed` alone; `lp@<rule>@<where>` by each deadline rule and
    placement alone (`summary`'s `lp_fixed`: the best of them over a scenario's traces);
    `served` as the bound stage does (the best run of those rules x placements x bandwidth
    `scales`, chosen per trace after the fact); and `rules_after`, the best of those rules x
    placements on every job, chosen per trace after the fact too (what choosing the run after the
    fact wins without giving any job up)."""
    whole = Instance.of(system, tables, jobs)
    bound = relaxation_bound(whole, time_limit_s=CLAIRVOYANT_LP_S)
    part = jobs.filter(pl.col("job_id").is_in(whole.job_id[bound.shares > ADMITTED].tolist()))

    def lp_served_by(rule: str, where: str) -> int:
        met = simulate(system, part, tables, make_policy(rule, placement=where)).jobs["met"].sum()
        return replayed(system, tables, jobs, whole, Run(part, 1.0, rule, where, int(met)))

    served = serve_lp_jobs(
        system, tables, jobs, bound, scales=scales, time_limit_s=CLAIRVOYANT_LP_S
    )
    combinations = [(r, p) for r in deadline_rules() for p in placements(system)]
    after = max(
        int(simulate(system, jobs, tables, make_policy(r, placement=p)).jobs["met"].sum())
        for r, p in combinations
    )
    met = {"lp_once": lp_served_by(*placed), "served": served.met, "rules_after": after}
    met |= {f"lp@{r}@{p}": lp_served_by(r, p) for r, p in combinations}
    return {f"{name}_sla": count / jobs.height for name, count in met.items()}


def with_best_fixed(rows: list[dict]) -> list[dict]:
    """`rows` with `lp_fixed_sla`: per scenario, the LP's jobs served by the one deadline rule and
    placement (`lp@...`) of the highest mean over the scenario's rows. Chosen on the traces it is
    measured on, the best of 16: if anything too high."""
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        fixed = [key for key in mine[0] if key.startswith("lp@")]
        best = max(fixed, key=lambda key: statistics.mean(r[key] for r in mine))
        for r in mine:
            r["lp_fixed_sla"], r["lp_fixed_by"] = r[best], best.removeprefix("lp@")[: -len("_sla")]
    return rows


def summary(rows: list[dict], schedules: list[str]) -> list[dict]:
    """Per scenario: mean SLA rates and each schedule's paired difference to the best baseline
    (with the planners' median seconds per plan)."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        entry = dict(
            scenario=scenario,
            traces=len(mine),
            best=mine[0]["best"],
            best_sla=round(statistics.mean(r["best_sla"] for r in mine), 4),
        )
        if "lp_fixed_by" in mine[0]:
            entry["lp_fixed_by"] = mine[0]["lp_fixed_by"]
        if "best_shortfall" in mine[0]:
            entry["best_shortfall"] = round(statistics.mean(r["best_shortfall"] for r in mine), 2)
        for name in schedules:
            diff, half = mean_ci([100 * (r[f"{name}_sla"] - r["best_sla"]) for r in mine])
            entry |= {
                f"{name}_sla": round(statistics.mean(r[f"{name}_sla"] for r in mine), 4),
                f"{name}_points": round(diff, 2),
                f"{name}_ci95": f"[{diff - half:.2f}, {diff + half:.2f}]",
            }
            if f"{name}_shortfall" in mine[0]:
                short = statistics.mean(r[f"{name}_shortfall"] for r in mine)
                entry[f"{name}_shortfall"] = round(short, 2)
            if f"{name}_s_per_plan" in mine[0]:
                per_plan = statistics.median(r[f"{name}_s_per_plan"] for r in mine)
                entry[f"{name}_s_per_plan"] = round(per_plan, 3)
        out.append(entry)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_validated_study(parser)
    parser.add_argument("--jobs", type=int, default=0)
    knobs = PlannerConfig()  # its defaults, those of config.yaml's evaluation.planner
    parser.add_argument("--samples", type=int, default=knobs.samples)
    parser.add_argument("--horizon", type=int, default=knobs.horizon_jobs)
    parser.add_argument("--keep-share", type=float, default=knobs.keep_share)
    parser.add_argument("--lp-time-limit", type=float, default=knobs.lp_time_limit_s)
    parser.add_argument("--bandwidth-share", type=float, default=knobs.bandwidth_share)
    parser.add_argument(
        "--schedules", default="planner", help=f"of {','.join(SCHEDULES)}; comma-separated"
    )
    parser.add_argument(
        "--planned-by", default=None, help=f"RULE@PLACEMENT the planners run, or {AGENT_RULE}"
    )
    parser.add_argument("--tune", type=int, default=0, help="validation traces to choose on")
    args = parser.parse_args()
    args.schedules = args.schedules.split(",")
    if not set(args.schedules) <= set(SCHEDULES):
        raise InputError(None, "--schedules", f"some of {','.join(SCHEDULES)}", args.schedules)
    study, scenarios = validated_study(args, 2)
    rows = [row for scenario in scenarios for row in measure(study, scenario, args)]
    if "clairvoyant" in args.schedules:
        rows = with_best_fixed(rows)
    print_table(args, [{k: v for k, v in r.items() if not k.startswith("lp@")} for r in rows])
    named = {name: [name] for name in SCHEDULES} | {"clairvoyant": list(CLAIRVOYANT)}
    print_table(args, summary(rows, [n for s in args.schedules for n in named[s]]))
    return 0


if __name__ == "__main__":
    run(main)
