"""`ga_offline`: a genetic algorithm that knows the whole job trace in advance (the offline bound).

It is the upper reference the online policies are measured against on small traces. Encoding
(MAGMA-style), per layer of every job: an accelerator-instance gene, an order key (seconds, a
planned start time) and a hold flag (the layer may not start before its key). Decoding
(`relmas.policies.ga_kernels`): each instance runs the layers assigned to it in key order, a layer
starting once its instance is free, its job ready and, if held, its key come; the schedule is
simulated by the engine's own kernels (shared bandwidth fluid, non-preemptive layers, layer
chains), so the GA optimises exactly what the simulator measures. A plan may keep an instance idle
for a job that has not arrived yet, for a faster instance, or off a saturated bandwidth.

Fitness, best first: deadlines met, then priority-weighted deadlines met, then total tardiness
(sum of max(0, finish - deadline)), then the sum of finish times (i.e. mean turnaround). The
initial population holds the schedules of every online non-learned policy (and of a trained agent
when given): each one's instances, start times and the holds it needs, which the decoder
reproduces exactly for whole layers; with elitism the result is never worse than any of them on
the trace. Operators: tournament selection, uniform crossover over jobs (a job's genes travel
together), mutation of instance genes, of single keys and of whole jobs' keys, lifted holds, and
moves of a job that the parent made late (behind all others, or ahead).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from relmas import catalog
from relmas.errors import InputError
from relmas.policies import ga_kernels
from relmas.policies.base import Policy, make_policy, register
from relmas.progress import progress
from relmas.sim.access import (
    job_deadlines,
    job_finish_times,
    job_next_rows,
    job_pieces_left,
    job_priorities,
)
from relmas.sim.engine import DecisionView, Engine, restore
from relmas.sim.engine_kernels import STATUS_DONE, entry_point
from relmas.sim.metrics import deadline_met

# Online policies whose schedules seed the initial population: every non-learned competitor (the
# kinds heuristic, rule and search), not the random floor (a reference, never the best schedule)
# nor the rules' admission forms (`catalog.search_seeds`).
SEED_KINDS = ("heuristic", "rule", "search")
SEED_POLICIES = catalog.search_seeds(*SEED_KINDS)
# Mutation strength: expected mutated genes per child for instance genes and for single keys;
# a key moves by a normal step of KEY_STEP mean layer latencies. Whole jobs: each job is shifted
# with probability 1 / jobs, by a normal step of one mean isolated job latency.
MUTATED_GENES = 2.0
KEY_STEP = 2.0
# Expected holds lifted per child (the layer then starts as soon as it is ready and next on its
# instance). Holds are not added at random: on contended synthetic traces that cost deadlines at
# the default budget; holds come from the seeds' schedules.
LIFTED_HOLDS = 2.0
# A child whose first parent missed deadlines moves one of those late jobs, with probability
# LATE_MOVE each: behind every other layer (sacrificed, as in Moore-Hodgson's rule: it frees its
# instances for jobs that can still make it), or ahead by a half-normal step of one mean isolated
# job latency (rescued).
LATE_MOVE = 0.25
CONFIG_KEY = "evaluation.ga"


@dataclass
class GAReport:
    """What one search did: budget used, and deadlines met by the seeds and by the best plan."""

    generations: int = 0
    evaluations: int = 0
    search_s: float = 0.0
    best_met: int = 0
    seed_met: dict[str, int] = field(default_factory=dict)
    history: list[int] = field(default_factory=list)  # best met, initial population then per gen


@dataclass(frozen=True)
class GeneLayout:
    """Gene numbering of one trace: job j's layers are genes job_start[j] .. job_start[j+1] - 1."""

    job_start: np.ndarray  # int64[jobs + 1]
    gene_job: np.ndarray  # int64[genes]: internal job index
    gene_row: np.ndarray  # int64[genes]: cost-table row of the layer
    gene_offset: np.ndarray  # int64[jobs]: gene of (job, row) = gene_offset[job] + row

    @classmethod
    def of(cls, engine: Engine) -> GeneLayout:
        models = engine.model_indices
        layers = engine.tables.n_layers[models]
        job_start = np.concatenate(([0], np.cumsum(layers))).astype(np.int64)
        gene_job = np.repeat(np.arange(models.size, dtype=np.int64), layers)
        first_row = engine.tables.first_row[models]
        gene_offset = job_start[:-1] - first_row
        gene_row = np.arange(job_start[-1], dtype=np.int64) - gene_offset[gene_job]
        return cls(job_start, gene_job, gene_row, gene_offset)

    @property
    def genes(self) -> int:
        return int(self.job_start[-1])

    @property
    def jobs(self) -> int:
        return self.job_start.size - 1


def build_plans(
    accelerators: np.ndarray,
    keys: np.ndarray,
    holds: np.ndarray,
    layout: GeneLayout,
    instances: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plan of each individual (rows): per instance, the genes it runs, in key order, and
    when each may start.

    Returns `sequences[individual]` (genes grouped by instance), `starts[individual]` (instance
    a's genes are `sequence[start[a]:start[a + 1]]`) and `releases[individual]` (a held gene's
    key, -inf for the others). A job's keys are first sorted, so that its layers take them in
    layer order; ties between keys go to the lower gene (job, then layer). Hence every plan is
    deadlock-free: the smallest unstarted (key, gene) is always next on its instance, and its job
    is ready once the earlier genes have run and it has arrived (holds are lifted when nothing
    else can happen, `relmas.policies.ga_kernels`).
    """
    by_key = np.argsort(keys, axis=1, kind="stable")
    within_job = np.argsort(layout.gene_job[by_key], axis=1, kind="stable")
    ordered = np.take_along_axis(keys, np.take_along_axis(by_key, within_job, axis=1), axis=1)
    releases = np.where(holds, ordered, -np.inf)
    by_key = np.argsort(ordered, axis=1, kind="stable")
    on = np.take_along_axis(accelerators, by_key, axis=1)
    sequences = np.take_along_axis(by_key, np.argsort(on, axis=1, kind="stable"), axis=1)
    counts = (accelerators[:, :, None] == np.arange(instances)).sum(axis=1)
    starts = np.zeros((accelerators.shape[0], instances + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=starts[:, 1:])
    return sequences, starts, releases


@register("ga_offline")
class GAOffline(Policy):
    """Offline genetic search over (instance, order key) per layer; replays the best plan.

    Budget: `population` individuals, at most `generations` generations and `time_limit_s` seconds
    of search (None = no limit; with a binding time limit the result depends on the machine's
    speed, with a binding generation count it depends only on `seed`). Traces of more than
    `max_jobs` jobs are refused. Seeds: the policies named in `seed_policies` (by default every
    online non-learned one; fewer only to measure the search itself), `extra_seeds` (policies),
    and `agent` (a trained RELMAS agent's directory: its policy's schedule).
    """

    name = "ga_offline"

    def __init__(
        self,
        seed: int = 0,
        population: int = 32,
        generations: int = 100,
        time_limit_s: float | None = 60.0,
        max_jobs: int = 50,
        elite: int = 2,
        tournament: int = 3,
        seed_policies: Sequence[str] = SEED_POLICIES,
        extra_seeds: Sequence[Policy] = (),
        agent: str | Path | None = None,
    ) -> None:
        _check_int("population", population, 2)
        _check_int("generations", generations, 0)
        _check_int("max_jobs", max_jobs, 1)
        _check_int("tournament", tournament, 1)
        _check_int("elite", elite, 1)
        if elite >= population:
            raise InputError(None, f"{CONFIG_KEY}.elite", "fewer elites than population", elite)
        if time_limit_s is not None and (
            isinstance(time_limit_s, bool)
            or not isinstance(time_limit_s, int | float)
            or time_limit_s <= 0
        ):
            raise InputError(
                None,
                f"{CONFIG_KEY}.time_limit_s",
                "a positive number of seconds or null",
                time_limit_s,
            )
        self.seed = seed
        self.population = population
        self.generations = generations
        self.time_limit_s = time_limit_s
        self.max_jobs = max_jobs
        self.elite = elite
        self.tournament = tournament
        self.seed_policies = tuple(seed_policies)
        self.extra_seeds = tuple(extra_seeds) + ((_learned_policy(agent),) if agent else ())
        if not self.seed_policies and not self.extra_seeds:
            raise InputError(None, f"{CONFIG_KEY}.seed_policies", "at least one seed", "none")
        self.report = GAReport()

    def reset(self, engine: Engine) -> None:
        """Search the best plan for the whole trace (the policy knows it in advance)."""
        jobs = engine.jobs.height
        if jobs > self.max_jobs:
            raise InputError(
                None,
                f"{CONFIG_KEY}.max_jobs",
                f"a trace of at most {self.max_jobs} jobs (ga_offline is an offline reference "
                "for small traces; raise max_jobs or evaluate it on a shorter trace)",
                f"{jobs} jobs",
            )
        started = time.perf_counter()
        layout = GeneLayout.of(engine)
        accelerator, key, hold, self.report = _Search(self, engine, layout).run()
        instances = len(engine.system.instance_types)
        sequences, starts, releases = build_plans(
            accelerator[None], key[None], hold[None], layout, instances
        )
        self._sequence, self._start, self._release = sequences[0], starts[0], releases[0]
        self._held = np.zeros(layout.genes, dtype=np.bool_)
        self._position = self._start[:-1].copy()
        self._layout = layout
        self._jobs = np.zeros(instances, dtype=np.int64)
        self._accelerators = np.zeros(instances, dtype=np.int64)
        self._plan_decision = entry_point(
            ga_kernels.plan_decision, engine.state, *self._plan_args()
        )
        self.report.search_s = time.perf_counter() - started

    def decide(self, view: DecisionView) -> list[tuple[int, int]]:
        count = self._plan_decision(view.engine.state, *self._plan_args())  # as `run_plan`
        return list(
            zip(self._jobs[:count].tolist(), self._accelerators[:count].tolist(), strict=True)
        )

    def run_to_completion(self, engine: Engine) -> bool:
        """Replay the best plan in one jitted loop; decision time = search + replay wall time."""
        engine.run_jitted(ga_kernels.run_plan, *self._plan_args())
        engine.decision_seconds += self.report.search_s
        return True

    def _plan_args(self) -> tuple[np.ndarray, ...]:
        return (
            self._sequence,
            self._start,
            self._position,
            self._layout.gene_job,
            self._layout.gene_row,
            self._release,
            self._held,
            self._jobs,
            self._accelerators,
        )


@dataclass(frozen=True)
class _Population:
    """Individuals (rows) with their fitness and which of their jobs missed the deadline."""

    accelerators: np.ndarray  # int64[individuals, genes]
    keys: np.ndarray  # float64[individuals, genes]
    holds: np.ndarray  # bool[individuals, genes]: the layer may not start before its key
    fitness: np.ndarray  # float64[individuals, 4], compared lexicographically, lower first
    late: np.ndarray  # bool[individuals, jobs]

    def take(self, index: np.ndarray) -> _Population:
        return _Population(*(array[index] for array in self._arrays()))

    def __add__(self, other: _Population) -> _Population:
        return _Population(
            *(np.concatenate(pair) for pair in zip(self._arrays(), other._arrays(), strict=True))
        )

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def best_first(self) -> np.ndarray:
        """Individuals in fitness order (ties: lower index first, so elites keep their place)."""
        return np.lexsort(self.fitness.T[::-1])

    def met(self, individual: int) -> int:
        return int(-self.fitness[individual, 0])


class _Search:
    """One run of the genetic algorithm on one engine's trace (the engine is not moved)."""

    def __init__(self, options: GAOffline, engine: Engine, layout: GeneLayout) -> None:
        self.options = options
        self.engine = engine
        self.layout = layout
        self.instances = len(engine.system.instance_types)
        self.rng = np.random.default_rng(options.seed)
        # Decoding starts every individual from the engine's initial state, without a timeline.
        self.initial = engine.snapshot()
        self.scratch = engine.snapshot()
        self.out = (
            np.zeros(self.instances, dtype=np.int64),
            np.zeros(self.instances, dtype=np.int64),
        )
        plan = np.zeros(0, dtype=np.int64)  # sequence, start, position: int64 vectors
        self.held = np.zeros(layout.genes, dtype=np.bool_)
        self.run_plan = entry_point(
            ga_kernels.run_plan,
            engine.kernel_tables,
            self.scratch,
            plan,
            plan,
            plan,
            layout.gene_job,
            layout.gene_row,
            np.zeros(0),
            self.held,
            *self.out,
        )
        self.deadline = job_deadlines(engine.state).copy()
        self.priority = job_priorities(engine.state).copy()
        tables = engine.tables
        self.key_step = KEY_STEP * float(tables.best_latency_s[layout.gene_row].mean())
        self.job_step = float(tables.isolated_s[engine.model_indices].mean())

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, GAReport]:
        options, report = self.options, GAReport()
        started = time.perf_counter()
        policies = [make_policy(name, seed=options.seed) for name in options.seed_policies]
        policies += options.extra_seeds
        seeds = [self.schedule_genes(policy) for policy in policies]
        population = self._evaluate(*(np.stack(genes) for genes in zip(*seeds, strict=True)))
        report.seed_met = {policy.name: population.met(i) for i, policy in enumerate(policies)}
        # Keep the best seeds if the population is smaller, else add mutated copies of them.
        population = population.take(population.best_first()[: options.population])
        missing = options.population - population.fitness.shape[0]
        if missing > 0:
            parents = population.take(np.arange(missing) % population.fitness.shape[0])
            population += self._evaluate(
                *self._mutate(parents.accelerators, parents.keys, parents.holds, parents.late)
            )
        report.evaluations = len(policies) + max(missing, 0)
        report.history.append(population.met(population.best_first()[0]))
        limit = options.time_limit_s
        bar = progress(options.generations, "ga_offline", "generation")
        while report.generations < options.generations and (
            limit is None or time.perf_counter() - started < limit
        ):
            order = population.best_first()
            children = self._evaluate(*self._mutate(*self._crossover(population, order)))
            population = population.take(order[: options.elite]) + children
            report.generations += 1
            report.evaluations += children.fitness.shape[0]
            report.history.append(population.met(population.best_first()[0]))
            bar.update()
        bar.close()
        best = population.best_first()[0]
        report.best_met = population.met(best)
        return (
            population.accelerators[best],
            population.keys[best],
            population.holds[best],
            report,
        )

    def schedule_genes(self, policy: Policy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Genes that decode to `policy`'s schedule of the trace: each layer's instance and start
        time, held where the policy kept a ready layer back from its idle instance.

        Exact for every schedule of whole layers (the decoder starts the same layers at the same
        decision points, `tests/test_ga_offline.py`); a layer the policy cut into pieces is
        represented by its first piece's instance and start (the decoder runs it whole). The
        layers a job dropped past its firm deadline never started are keyed at the run's end,
        after every layer that ran on their instance (and held: they wait until the job is gone).
        """
        engine, layout = self.engine, self.layout
        replay = Engine(engine.system, engine.tables, engine.jobs)
        policy.reset(replay)
        accelerator = np.zeros(layout.genes, dtype=np.int64)
        key = np.zeros(layout.genes)
        started = np.zeros(layout.genes, dtype=bool)
        cursor = job_next_rows(replay.state)
        while (view := replay.next_decision()) is not None:
            assignments = list(policy.decide(view))
            for assignment in assignments:
                job = assignment[0]
                if job_pieces_left(replay.state, job) == 0:  # a layer's first (or only) piece
                    gene = layout.gene_offset[job] + cursor[job]
                    accelerator[gene] = assignment[1]
                    key[gene] = view.now
                    started[gene] = True
                replay.assign(*assignment)
            if not assignments:
                replay.wait()
        key[~started] = replay.now
        # The holds it needs: the layers that a plan holding every layer back kept waiting.
        _, hold = self._decode(accelerator[None], key[None], np.ones((1, layout.genes), bool))
        return accelerator, key, hold[0]

    def _decode(
        self, accelerators: np.ndarray, keys: np.ndarray, holds: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Simulate the individuals' plans: their jobs' finish times, and which of their genes'
        holds bound (kept a layer waiting); the other holds can be lifted without changing the
        schedule."""
        layout = self.layout
        plans = build_plans(accelerators, keys, holds, layout, self.instances)
        finish = np.empty((accelerators.shape[0], layout.jobs))
        binding = np.zeros_like(holds)
        for individual, (sequence, start, release) in enumerate(zip(*plans, strict=True)):
            restore(self.scratch, self.initial)
            self.held[:] = False
            status = self.run_plan(
                self.engine.kernel_tables,
                self.scratch,
                sequence,
                start,
                start[:-1].copy(),
                layout.gene_job,
                layout.gene_row,
                release,
                self.held,
                *self.out,
            )
            if status != STATUS_DONE:
                raise RuntimeError("a plan stalled the simulation; plans are deadlock-free")
            finish[individual] = job_finish_times(self.scratch)
            binding[individual] = self.held
        return finish, binding

    def _evaluate(
        self, accelerators: np.ndarray, keys: np.ndarray, holds: np.ndarray
    ) -> _Population:
        """Simulate the individuals. Fitness: (-deadlines met, -priority-weighted met, total
        tardiness, sum of finish times), compared lexicographically, lower first; a job dropped
        past its firm deadline (NaN finish) is missed and adds to neither sum (dropping late work
        early frees the instances). Holds that did not bind are lifted (the same schedule), so
        that only holds that matter are inherited."""
        finish, holds = self._decode(accelerators, keys, holds)
        met = deadline_met(finish, self.deadline)
        tardiness = np.fmax(finish - self.deadline, 0.0).sum(axis=1)
        weighted = (met * self.priority).sum(axis=1)
        total = np.nansum(finish, axis=1)
        fitness = np.stack((-met.sum(axis=1), -weighted, tardiness, total), axis=1)
        return _Population(accelerators, keys, holds, fitness, ~met)

    def _crossover(
        self, population: _Population, order: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Children's genes: parent pairs by tournament, uniform crossover over jobs. Also returns
        the first parents' late jobs (for the late-job mutation)."""
        rng, options = self.rng, self.options
        count = options.population - options.elite
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        contenders = rng.integers(0, order.size, size=(2, count, options.tournament))
        winners = np.take_along_axis(
            contenders, np.argmin(rank[contenders], axis=2)[..., None], axis=2
        )[..., 0]
        from_first = (rng.random((count, self.layout.jobs)) < 0.5)[:, self.layout.gene_job]
        first, second = population.take(winners[0]), population.take(winners[1])
        return (
            np.where(from_first, first.accelerators, second.accelerators),
            np.where(from_first, first.keys, second.keys),
            np.where(from_first, first.holds, second.holds),
            first.late,
        )

    def _mutate(
        self, accelerators: np.ndarray, keys: np.ndarray, holds: np.ndarray, late: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """New instances for a few genes, a normal step for a few keys and for a few whole jobs'
        keys, a few holds lifted; and one job that the parent made late is deferred behind
        every other layer (sacrificed: it frees its instances for jobs that can still make it)
        or promoted."""
        rng, layout = self.rng, self.layout
        count = accelerators.shape[0]
        rate = min(1.0, MUTATED_GENES / layout.genes)
        moved = rng.random((count, layout.genes)) < rate
        accelerators = np.where(
            moved, rng.integers(0, self.instances, size=moved.shape), accelerators
        )
        jittered = rng.random((count, layout.genes)) < rate
        keys = keys + jittered * rng.normal(0.0, self.key_step, size=keys.shape)
        lifted = rng.random((count, layout.genes)) < min(1.0, LIFTED_HOLDS / layout.genes)
        holds = holds & ~lifted
        shifted = rng.random((count, layout.jobs)) < 1.0 / layout.jobs
        shift = shifted * rng.normal(0.0, self.job_step, size=shifted.shape)
        # One of the parent's late jobs, chosen uniformly: deferred or promoted (LATE_MOVE each).
        weights = late * rng.random(late.shape)
        chosen = np.argmax(weights, axis=1)
        draw = np.where(weights.max(axis=1) > 0, rng.random(count), 1.0)
        defer = np.flatnonzero(draw < LATE_MOVE)
        promote = np.flatnonzero((draw >= LATE_MOVE) & (draw < 2 * LATE_MOVE))
        span = keys.max(axis=1) - keys.min(axis=1) + self.job_step
        shift[defer, chosen[defer]] += span[defer]
        shift[promote, chosen[promote]] -= np.abs(rng.normal(0.0, self.job_step, promote.size))
        return accelerators, keys + shift[:, layout.gene_job], holds


def _learned_policy(agent: str | Path) -> Policy:
    """The learned policy that deploys the trained agent `agent` (its directory), as a seed."""
    from relmas.rl.agent import read_agent_info

    resize = read_agent_info(agent).observation.resize
    name = next(n for n in catalog.learned() if (n in catalog.resizing()) == resize)
    return make_policy(name, agent=agent)


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(None, f"{CONFIG_KEY}.{name}", f"an integer >= {minimum}", value)
