"""`relmas train`: train the RELMAS agent of one configured scenario, end to end.

Training traces come from `training.seeds`, validation traces from `training.validation_seeds` —
both disjoint from `evaluation.seeds`, so evaluation is on unseen traces. The reference baseline
(slot 0 of the observation, and the teacher of the warm start, `training.dqn.teacher_steps`, and
of the bonus) is, with `reference: best`, the rule or target-aware baseline of the best rows of
the validation file `relmas validate` wrote, with the placement chosen for it there
(`relmas.evaluate.best_placed`: one place for the choice); a named reference takes its placement
from that file too, or the whole system without one. For relmas_resize the teacher is scored on
the validation traces whole and cut, and the better is the teacher. The agent is validated after
the warm start and every `training.dqn.validation_every` steps (SLA rate on the validation
traces); the best is best.pt.

On a scenario whose jobs carry service targets, "best" is the least service shortfall on the
validation traces, ties by SLA rate (`relmas.rl.train.validation_key`), for the teacher and
best.pt alike; the observation then has the service-level slots and features unless
`training.observation.service` says otherwise.

With `training.keeper.traces` > 0 a keeper that gives jobs up is learned (`relmas.rl.keeping`);
the best deadline-ranked rule with it replaces the reference baseline, as teacher and in the
agent's environment, only if it scores better on the validation traces.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from relmas.command import check_distinct_outputs, cost_inputs, load_configs
from relmas.errors import InputError
from relmas.hw.spec import Spec
from relmas.rl.agent import AgentInfo, write_agent_info
from relmas.rl.checkpoint import BEST, load_network
from relmas.rl.env import NO_SERVICE_TERMS, SchedulingEnv
from relmas.rl.features import FEATURES_VERSION, Layout
from relmas.rl.keeper import KeeperWeights
from relmas.rl.keeping import (
    LearnedKeeper,
    keeper_made_for,
    keeper_rule,
    kept_candidates,
    learn_agent_keeper,
    read_keeper,
)
from relmas.rl.network import QNetwork
from relmas.rl.observation import ObservationSettings
from relmas.rl.overhead import decision_cost
from relmas.rl.settings import (
    TrainingSettings,
    parse_training,
)
from relmas.rl.setup import (
    RANKED,
    Policy,
    TrainingSetup,
    observation_with,
    ranked,
    training_setup,
)
from relmas.rl.teacher import CUT_SUFFIX, BaselineTeacher
from relmas.rl.train import Logger, TrainResult, train, validation_key
from relmas.sim.costs import WHOLE, CostTables
from relmas.sim.system import System
from relmas.study import Study
from relmas.workload import generate_trace

Scores = dict[str, dict[str, float]]  # validation metrics of each teacher (whole, cut)


@dataclass(frozen=True)
class ScenarioTrainResult:
    agent_dir: Path
    learner: TrainResult  # steps, episodes, best step, checkpoint paths
    reference: str  # the baseline of the reference slot
    teacher: str | None  # the teacher of the warm start (None without one)
    teachers_validation: dict[str, float]  # SLA rate of the reference baseline (and its cut
    # form, for relmas_resize) on the validation traces; on traces with targets their
    # shortfall, which ranks them first, is in agent.json
    validation: dict[str, float]  # the best agent's validation metrics
    decision_cost: dict[str, Any]  # MACs, energy, latency of a decision (overhead.decision_cost)
    keeper: LearnedKeeper | None  # the keeper learned (None: training.keeper.traces 0)
    kept: bool  # whether the agent gives jobs up by it (its rule won on validation)
    wall_seconds: float
    cpu_seconds: float
    restarted_because: list[str]  # settings changed since the saved run, which was not resumed

    def metrics(self) -> dict[str, float]:
        """Flat numbers for tracking."""
        return {
            "train_wall_seconds": self.wall_seconds,
            "train_cpu_seconds": self.cpu_seconds,
            "train_steps": float(self.learner.steps),
            "train_episodes": float(self.learner.episodes),
            "best_step": float(self.learner.best_step),
            **{f"best_val_{k}": v for k, v in self.validation.items()},
            "reference_val_sla_rate": self.teachers_validation[self.reference],
            # the worst case, every row scored
            "decision_macs": float(self.decision_cost["macs"]),
            "decision_energy_j": float(self.decision_cost["energy_j"]),
            **(
                {**self.keeper.metrics(), "keeper_kept": float(self.kept)}
                if self.keeper is not None
                else {}
            ),
        }


def train_scenario(
    config: Mapping[str, Any],
    scenario: str,
    out_dir: str | Path,
    costs_dir: str | Path,
    *,
    source: str | Path | None = None,
    logger: Logger | None = None,
    resume: bool = True,
    policy: str | None = None,
    validation: str | Path | None = None,
    keeper_file: str | Path | None = None,
) -> ScenarioTrainResult:
    """Train the agent of `scenario` into `out_dir` (best.pt, last.pt, agent.json).

    `policy` is a learned policy of the catalog (None: the first, `relmas`); a resizing one
    (`relmas_resize`) trains an agent whose actions also cut layers into pieces: it needs the piece
    tables beside the cost tables (`relmas profile --pieces`).

    With `training.keeper.traces` > 0 the keeper is `keeper_file`'s (`relmas keeper`) or, without
    one, learned here.

    `logger(metrics, step)` receives the learner's curves and the validation scores;
    `resume` continues from `out_dir`/last.pt when present; when the training settings changed
    since, it starts afresh instead (and says why in `restarted_because`).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    log = logger or (lambda metrics, step: None)
    out_dir = Path(out_dir)
    setup = training_setup(
        config, scenario, costs_dir, source=source, policy=policy, validation=validation
    )
    settings, system, tables = setup.settings, setup.system, setup.tables
    resize, observation = setup.resize, setup.observation
    study = Study(config, source)
    parsed = study.scenario(scenario, settings.jobs)
    split_variants = tables.pieces.variants if resize else (WHOLE,)
    problem = _problem(config, scenario, system, tables, split_variants if resize else None)
    pieces = tables.pieces.most_pieces if resize else None
    validate = setup.validator()
    layout = setup.env(setup.validation_traces[0]).layout
    teachers, best = _best_teacher(setup, layout, validate, pieces)
    log(_scores_log("teacher", teachers), 0)
    keeper = None
    if settings.keeper.traces > 0 and validation is not None:
        targets = parsed.has_targets()
        keeper = _keeper_of(setup, study, scenario, validation, keeper_file, targets)
        plain = KeptTeacher(setup, validate, teachers, best)
        rules = kept_candidates(validation, scenario, tables.types, targets)
        setup, validate, teachers, best = _with_keeper_if_better(plain, keeper, rules, pieces, log)
        observation = setup.observation

    def make_env(seed: int) -> SchedulingEnv:
        return setup.env(generate_trace(scenario, parsed, system, tables, seed, source))

    teacher_rule = best if settings.dqn.teacher_steps > 0 else None
    teacher = teacher_rule.name if teacher_rule is not None else None
    learner = train(
        make_env,
        settings.dqn,
        out_dir,
        manifest=_manifest(observation, settings, problem, setup.keeper),
        logger=log,
        validate=validate,
        teacher=teacher_rule,
        resume=resume,
    )
    hosts = (settings.overhead_accelerator,) if settings.overhead_accelerator else tables.types
    specs = {host: study.spec(host) for host in hosts}
    cost = cheapest_decision(load_network(out_dir / BEST), specs, setup.keeper)
    info = AgentInfo(
        scenario=scenario,
        observation=observation,
        reward=settings.reward,
        instance_types=system.instance_types,
        accelerator_types=tables.types,
        split_variants=split_variants,
        decision_cost=cost,
        validation=learner.best_metrics,
        teacher=teacher,
        teacher_bonus=settings.dqn.teacher_bonus if teacher is not None else 0.0,
        teachers_validation=_metric(teachers, "sla_rate"),
        teachers_shortfall=_metric(teachers, "shortfall"),
        keeper=setup.keeper,
    )
    write_agent_info(out_dir, info)
    return ScenarioTrainResult(
        agent_dir=out_dir,
        learner=learner,
        reference=observation.reference,
        teacher=teacher,
        teachers_validation=info.teachers_validation,
        validation=learner.best_metrics,
        decision_cost=cost,
        keeper=keeper,
        kept=setup.keeper is not None,
        wall_seconds=time.perf_counter() - wall,
        restarted_because=learner.restarted_because,
        cpu_seconds=time.process_time() - cpu,
    )


class KeptTeacher(NamedTuple):
    """The keeper's rule as the agent's teacher, giving jobs up by the keeper: its setup, its
    validator and its validation scores (whole, and cut for a resizing agent), the better."""

    setup: TrainingSetup
    validate: Callable[[Policy], dict[str, float]]
    teachers: Scores
    best: BaselineTeacher


def _kept_teacher(
    setup: TrainingSetup,
    weights: KeeperWeights,
    rule: tuple[str, str],
    layout: Layout,
    most_pieces: tuple[int, ...] | None,
) -> KeptTeacher:
    """`rule` (name, placement) as reference and teacher, in environments where the keeper of
    `weights` gives jobs up, scored on the validation traces."""
    traces = setup.validation_traces
    observation = observation_with(setup.settings.observation, setup.resize, rule, traces[0])
    kept = replace(setup, observation=observation, keeper=weights)
    validate = kept.validator()
    return KeptTeacher(kept, validate, *_best_teacher(kept, layout, validate, most_pieces))


def _keeper_of(
    setup: TrainingSetup,
    study: Study,
    scenario: str,
    validation: str | Path,
    keeper_file: str | Path | None,
    targets: bool,
) -> LearnedKeeper:
    """The keeper of `keeper_rule` (of the `validation` rows; `targets`: whether the scenario's
    jobs carry service targets): `keeper_file`'s (`relmas keeper`; refused if learned for other
    settings) where given, else learned here."""
    rule = keeper_rule(validation, scenario, setup.tables.types, targets)
    if keeper_file is not None:
        return read_keeper(keeper_file, keeper_made_for(study.config, scenario, rule))
    settings = setup.settings
    return learn_agent_keeper(
        study, scenario, setup.system, setup.tables, settings.seeds, settings.keeper, rule
    )


def _with_keeper_if_better(
    plain: KeptTeacher,
    keeper: LearnedKeeper,
    rules: Sequence[tuple[str, str]],
    most_pieces: tuple[int, ...] | None,
    log: Logger,
) -> KeptTeacher:
    """The best of `rules` (name, placement) giving jobs up by `keeper` where it beats `plain`
    on validation, else `plain`: a keeper that does not pay on held-out traces is not deployed.
    The keeper reads online features of no rule in particular, so the rule it serves best is
    chosen with it, each candidate a few validation runs (its labels are the costly part)."""
    if keeper.weights is None:
        return plain
    best, score = plain, validation_key(plain.teachers[plain.best.name], "sla_rate")
    for rule in rules:
        kept = _kept_teacher(plain.setup, keeper.weights, rule, plain.best.layout, most_pieces)
        log(_scores_log("kept", kept.teachers), 0)
        ours = validation_key(kept.teachers[kept.best.name], "sla_rate")
        if ours > score:
            best, score = kept, ours
    return best


def best_scored(scores: Scores) -> str:
    """The best of `scores` by `validation_key` on the SLA rate (the first of equals, in their
    order)."""
    return max(scores, key=lambda name: validation_key(scores[name], "sla_rate"))


def _metric(scores: Scores, metric: str) -> dict[str, float]:
    """`metric` of each of `scores` that has it."""
    return {name: values[metric] for name, values in scores.items() if metric in values}


def _scores_log(kind: str, scores: Scores) -> dict[str, float]:
    """`scores` as tracked: val_<kind>_<name>_<metric>, the SLA rate and the shortfall."""
    return {
        f"val_{kind}_{name}_{metric}": values[metric]
        for name, values in scores.items()
        for metric in RANKED
        if metric in values
    }


def _problem(
    config: Mapping[str, Any],
    scenario: str,
    system: System,
    tables: CostTables,
    split_variants: tuple[str, ...] | None,
) -> dict[str, Any]:
    """What the agent is trained on besides the training settings: resuming across a change of
    any of it would finish training on another problem."""
    return {
        "scenario": config["scenarios"][scenario],
        "system": asdict(system),
        "accelerators": {name: config["accelerators"][name] for name in system.accelerator_types},
        "models": {name: config["models"][name] for name in tables.models},
        **({"split_variants": split_variants} if split_variants is not None else {}),
    }


def _best_teacher(
    setup: TrainingSetup,
    layout: Layout,
    validate: Callable[[Policy], dict[str, float]],
    most_pieces: tuple[int, ...] | None,
) -> tuple[Scores, BaselineTeacher]:
    """The validation SLA rate (and on traces with targets the shortfall) of the reference
    baseline of `setup` acting as teacher (its rule run by the engine), and with `most_pieces`
    (a resizing agent) of its cut form too (in the environment, `validate`); the better of them
    (`best_scored`)."""
    name = setup.observation.reference
    candidates = {name: BaselineTeacher(name, layout)}
    scores = {name: setup.rule_scores(name)}
    if most_pieces is not None:
        cut = name + CUT_SUFFIX
        candidates[cut] = BaselineTeacher(cut, layout, most_pieces)
        scores[cut] = ranked(validate(candidates[cut]))
    return scores, candidates[best_scored(scores)]


def cheapest_decision(
    network: QNetwork, specs: Mapping[str, Spec], keeper: KeeperWeights | None
) -> dict[str, Any]:
    """The cost of a decision (and of its `keeper`'s plans) on the accelerator (of `specs`)
    where a decision takes the least energy (every row scored)."""
    costs = [decision_cost(network, name, spec, keeper) for name, spec in specs.items()]
    return min(costs, key=lambda cost: cost["energy_j"])


def _manifest(
    observation: ObservationSettings,
    settings: TrainingSettings,
    problem: Mapping[str, Any],
    keeper: KeeperWeights | None,
) -> dict[str, Any]:
    """The run's manifest besides the learner config: what the agent sees, how it is rewarded,
    the `problem` it is trained on and the keeper that gives jobs up in its environment; resuming
    across a change of any of them would finish training on another problem (the learner
    restarts instead, `relmas.rl.train`)."""
    return {
        "observation": _recorded(asdict(observation), {"service": False}),
        "features": FEATURES_VERSION,
        "reward": _recorded(asdict(settings.reward), NO_SERVICE_TERMS),
        **problem,
        **({"keeper": asdict(keeper)} if keeper is not None else {}),
    }


def _recorded(settings: dict[str, Any], neutral: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` without the keys at their `neutral` values (the service levels' options,
    added after other settings): a run saved before those keys existed is the same run, it
    resumes, and its checkpoint keeps its bytes."""
    return {k: v for k, v in settings.items() if k not in neutral or v != neutral[k]}


# The validation scores of the baseline policies that train_scenario logs beside the agent's own.
_BASELINE_METRIC = re.compile(r"val_(teacher|kept)_([a-z0-9_]+?)_(sla_rate|shortfall)")


def train_command(args: argparse.Namespace) -> None:
    """Train the RELMAS agent of one scenario (`--policy relmas_resize`: one that also cuts
    layers); one MLflow run with its learning curves."""
    from relmas import tracking
    from relmas.figures.results import plot_learning_curves
    from relmas.progress import advance_to, progress
    from relmas.rl.curve import read_curve

    config = load_configs(args.config)
    source = ", ".join(args.config)
    study = Study(config, source)
    system = study.system(study.check_scenario(args.scenario))
    check_distinct_outputs(
        {
            "--config": args.config,
            "--costs": cost_inputs(args.costs, system.accelerator_types),
            "--validation": [args.validation] if args.validation else [],
            "--keeper": [args.keeper] if args.keeper else [],
        },
        {"--out": [args.out]},
    )
    settings = parse_training(config, source)
    if args.keeper and (settings.keeper.traces == 0 or not args.validation):
        expected = "a keeper (training.keeper.traces > 0) and --validation beside --keeper"
        raise InputError(source, "training.keeper.traces", expected, settings.keeper.traces)
    bar = progress(settings.dqn.total_steps, f"train {args.scenario} {args.policy}", "step")
    with tracking.stage_run(
        "train",
        config,
        tags={"scenario": args.scenario, "policy": args.policy},
        params={"scenario": args.scenario, "policy": args.policy, "training": config["training"]},
    ) as run:
        baselines: dict[tuple[str, str], dict[str, Any]] = {}

        def logger(metrics: Mapping[str, float], step: int) -> None:
            own = {}
            for name, value in metrics.items():
                match = _BASELINE_METRIC.fullmatch(name)
                if match:  # a baseline policy's validation score: a table row, not a metric name
                    kind, policy, metric = match.groups()
                    row = baselines.setdefault((kind, policy), {"policy": policy, "kind": kind})
                    row[f"val_{metric}"] = value
                else:
                    own[name] = value
            run.log_metrics(own, step=step)
            advance_to(bar, step, own)

        result = train_scenario(
            config,
            args.scenario,
            args.out,
            args.costs,
            source=source,
            logger=logger,
            resume=not args.fresh,
            policy=args.policy,
            validation=args.validation,
            keeper_file=args.keeper,
        )
        bar.close()
        run.log_metrics(result.metrics())
        if baselines:
            table = pl.from_dicts(list(baselines.values()), infer_schema_length=None)
            run.log_table(table, "validation_baselines.json")
        for name in ("best.pt", "agent.json", "curve.parquet"):
            run.log_artifact(args.out / name, "agent")
        best = (result.reference, result.teachers_validation[result.reference])
        curve = read_curve(args.out / "curve.parquet")
        run.log_figure(
            plot_learning_curves(
                {f"{args.scenario}: {args.policy}": curve},
                {f"{args.scenario}: {args.policy}": best},
                {f"{args.scenario}: {args.policy}": args.policy},
            ),
            "learning_curve.png",
        )
    if result.restarted_because:
        print(
            f"{args.out}: trained afresh (settings changed since last.pt: "
            f"{', '.join(result.restarted_because)})"
        )
    print(
        f"{args.scenario}: {result.learner.steps} steps in {result.wall_seconds:.0f} s, "
        f"best validation {result.validation} at step {result.learner.best_step} -> {args.out}"
    )
