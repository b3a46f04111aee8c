"""A proven upper bound on the deadlines any schedule meets: the engine relaxed to an LP (HiGHS).

Every schedule the engine can produce gives a feasible point of this LP (docs/ceiling.md argues
each rule), so the LP's optimum bounds the deadlines met from above. Per job j: x_j in [0, 1], the
job counted as met; per class c of its layers with the same least costs, how many run on type k
(w_ck; a layer cut into pieces counts by the share of its pieces on each type). Rules kept, for the
jobs counted as met:

- each layer is placed: sum_k w_ck = n_c x_j;
- the chain: one layer at a time, inside [arrival, deadline]; a whole layer takes at least its
  alone latency on its type, a cut one at least its longest piece's fastest alone latency (the
  pieces in parallel at best);
- capacity of a type over any window W = [t1, t2]: the jobs met whose [arrival, deadline] lies
  inside W run inside W, so their time on type k is at most count_k |W|;
- bandwidth over any window: the bytes those jobs move are at most dram_gbps |W|;
- whole jobs (count rows): inside a window, at most as many met jobs as the least uses of the
  pooled instance time and of the bandwidth fit.

Each layer is charged, per type, the least of its whole costs and every cut's (`_layer_costs`),
so pieces add no columns.

Windows are added by separation (the most violated ones of the current solution, rounds until none
is violated or the time limit); every LP solved along the way is a relaxation, so each round's
optimum is a bound. The bound reported is not the solver's objective but a certificate computed
from its duals by weak duality (any row prices of the right signs give a bound), so that solver
tolerances can only loosen it, never make it wrong.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

from relmas.ceiling.instance import Instance
from relmas.sim.engine_kernels import met_by

_INF = highspy.kHighsInf


@dataclass(frozen=True)
class Bound:
    """The proven bound of one trace: `met` deadlines at most (of `jobs`)."""

    met: int
    value: float  # the certified LP value (met is its floor)
    jobs: int
    # converged: no window violated; time_limit: stopped early; "solver: ..." a round HiGHS did
    # not solve. All are proven: the bound is the last finished round's certificate (the jobs
    # that can meet their deadline alone when no round finished).
    status: str
    rounds: int
    windows: int
    seconds: float
    # float64[jobs], the engine's order: x_j of the last LP solved, how much of each job it counts
    # as met (all 0 when no round finished); what relmas.ceiling.admission serves
    shares: np.ndarray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)


@dataclass(frozen=True)
class _Block:
    """One model's columns and rows, in time units (bytes: the time the bandwidth takes).

    Local column c * types + k: how many layers of class c run on type k (whole, or the share of
    a cut layer's pieces there).
    """

    columns: int
    upper: np.ndarray  # float64[columns]
    # Equality rows `coef . cols - x_coef x_j = 0`: each class's layers are all placed.
    equality: list[tuple[np.ndarray, np.ndarray, float]]
    chain: tuple[np.ndarray, np.ndarray]  # the job's least time: coef . cols
    use: list[tuple[np.ndarray, np.ndarray]]  # per resource: coef . cols
    shortest: float  # the chain's least time, layers at their fastest


def _layer_costs(
    instance: Instance, op: int, unit: float, per_byte: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per type, the least busy time, bytes and chain time of layer `op` per unit placed there.

    Whole on type k, the layer costs its alone latency and bytes there. Cut by variant v into P
    pieces, a share f of its pieces on type k costs at least f * P * (cheapest piece on k) of time
    and bytes, and the layer holds its chain at least max over pieces of the fastest piece time
    (in parallel at best) — at most what any share of it on k is charged. So the least of the
    whole and every cut, per type, keeps the LP a relaxation with one column per type.
    """
    time = instance.alone_s[op] / unit
    moved = instance.dram_bytes[op] * per_byte
    chain = time.copy()
    for alone, _, dram in instance.cuts(op):
        count = alone.shape[0]
        time = np.minimum(time, count * alone.min(axis=0) / unit)
        moved = np.minimum(moved, count * dram.min(axis=0) * per_byte)
        chain = np.minimum(chain, alone.min(axis=1).max() / unit)
    return time, moved, chain


def _block(instance: Instance, job: int, unit: float, resources: int) -> _Block:
    """The LP block of `job`'s layers (every job with the same layers left shares it)."""
    types = len(instance.types)
    per_byte = 1.0 / (instance.bandwidth_bps * unit) if resources > types else 0.0
    classes: dict[bytes, int] = {}
    costs: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for op in instance.ops(job):
        cost = _layer_costs(instance, op, unit, per_byte)
        key = np.concatenate(cost).tobytes()
        classes[key] = classes.get(key, 0) + 1
        costs[key] = cost
    n = len(classes)
    size = np.array(list(classes.values()), dtype=np.float64)
    time, moved, chain = (np.array([costs[k][i] for k in classes]) for i in range(3))
    local = np.arange(n * types).reshape(n, types)
    use = [(local[:, k], time[:, k]) for k in range(types)]
    use += [(local.ravel(), moved.ravel())] * (resources - types)
    return _Block(
        columns=n * types,
        upper=np.repeat(size, types),
        equality=[(local[c], np.ones(types), size[c]) for c in range(n)],
        chain=(local.ravel(), chain.ravel()),
        use=use,
        shortest=float((size * chain.min(axis=1)).sum()),
    )


class Relaxation:
    """The LP, its rows kept as a sparse matrix beside HiGHS's copy for the certificate.

    Columns: x_j; u_jr (job j's use of resource r: its time on type r, or its bytes); the blocks.
    """

    def __init__(
        self,
        instance: Instance,
        threads: int,
        counted: np.ndarray | None = None,
        extra_upper: np.ndarray | None = None,
    ) -> None:
        """`counted`: the jobs whose x_j may be positive (all by default); `extra_upper`: the
        upper bounds of a caller's own columns, after the blocks (`extra_start`), cost 0."""
        n, types = instance.n_jobs, len(instance.types)
        extra = np.zeros(0) if extra_upper is None else np.asarray(extra_upper, dtype=np.float64)
        self.n = n
        self.types = types
        self.resources = types + (1 if np.isfinite(instance.bandwidth_bps) else 0)
        # The LP in seconds and bytes is badly conditioned: times in units of a typical layer's.
        unit = float(np.median(instance.alone_s.min(axis=1))) or 1.0  # 1 s if layers take none
        # jobs with the same layers left share a block: a chain is its first row and its length
        lengths = np.diff(instance.first_op)
        chains = [(int(instance.op_row[instance.first_op[j]]), int(lengths[j])) for j in range(n)]
        first_job = {chain: j for j, chain in reversed(list(enumerate(chains)))}
        by_chain = {c: _block(instance, j, unit, self.resources) for c, j in first_job.items()}
        self.blocks = [by_chain[chain] for chain in chains]
        sizes = np.array([b.columns for b in self.blocks])
        self.u_start = n
        self.block_start = n + n * self.resources + np.concatenate(([0], np.cumsum(sizes)[:-1]))
        self.extra_start = n + n * self.resources + int(sizes.sum())
        self.columns = self.extra_start + extra.size
        self.arrival = instance.arrival_s / unit
        self.deadline = met_by(instance.deadline_s) / unit  # what the engine counts as met
        self.capacity = np.concatenate(
            [instance.count.astype(np.float64), [1.0] * (self.resources - types)]
        )
        upper = np.empty(self.columns)
        fits = np.array([b.shortest for b in self.blocks]) <= self.deadline - self.arrival
        upper[:n] = fits  # a job that cannot meet its deadline alone is never met
        if counted is not None:
            upper[:n] *= counted
        upper[self.extra_start :] = extra
        for j, b in enumerate(self.blocks):
            upper[self.block_start[j] : self.block_start[j] + b.columns] = b.upper
            for r, (cols, coef) in enumerate(b.use):
                upper[self.u(j, r)] = float(coef @ b.upper[cols])
        self.upper = upper
        self.highs = _highs(threads)
        self.highs.addVars(self.columns, np.zeros(self.columns), upper)
        cost = np.zeros(self.columns)
        cost[:n] = -1.0  # HiGHS minimises: -(jobs met)
        self.minimise(cost)
        self.rows: list[sp.csr_matrix] = []
        self.row_lower: list[np.ndarray] = []
        self.row_upper: list[np.ndarray] = []
        self.windows: set[tuple[float, float, int]] = set()
        self._structure_rows()

    def minimise(self, cost: np.ndarray) -> None:
        """Make `cost` (one per column) the objective."""
        self.cost = np.asarray(cost, dtype=np.float64)
        self.highs.changeColsCost(self.columns, np.arange(self.columns, dtype=np.int32), self.cost)

    def u(self, job: int, resource: int) -> int:
        """The column of u_jr."""
        return self.u_start + job * self.resources + resource

    def add_rows(
        self, lower: list[float], upper: list[float], cols: list[np.ndarray], vals: list[np.ndarray]
    ) -> None:
        """Rows `lower <= vals . cols <= upper`, one per entry (infinite sides: none)."""
        starts = np.concatenate(([0], np.cumsum([len(c) for c in cols])))
        matrix = sp.csr_matrix(
            (np.concatenate(vals), np.concatenate(cols), starts), shape=(len(cols), self.columns)
        )
        lo, up = np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64)
        self.highs.addRows(
            matrix.shape[0],
            np.where(np.isinf(lo), -_INF, lo),
            np.where(np.isinf(up), _INF, up),
            matrix.nnz,
            matrix.indptr.astype(np.int32),
            matrix.indices.astype(np.int32),
            matrix.data,
        )
        self.rows.append(matrix)
        self.row_lower.append(lo)
        self.row_upper.append(up)

    def _structure_rows(self) -> None:
        lower: list[float] = []
        upper: list[float] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []

        def row(lo: float, up: float, c: np.ndarray, v: np.ndarray) -> None:
            lower.append(lo)
            upper.append(up)
            cols.append(c)
            vals.append(v)

        for j, b in enumerate(self.blocks):
            start = self.block_start[j]
            for c, v, x_coef in b.equality:
                row(0.0, 0.0, np.append(start + c, j), np.append(v, -x_coef))
            c, v = b.chain
            row(
                -np.inf,
                0.0,
                np.append(start + c, j),
                np.append(v, -(self.deadline[j] - self.arrival[j])),
            )
            for r, (c, v) in enumerate(b.use):
                row(0.0, 0.0, np.append(start + c, self.u(j, r)), np.append(v, -1.0))
        self.add_rows(lower, upper, cols, vals)

    def usage(self, solution: np.ndarray) -> np.ndarray:
        """float64[jobs, resources]: u_jr in `solution`."""
        return solution[self.u_start : self.u_start + self.n * self.resources].reshape(self.n, -1)

    def add_windows(self, windows: list[tuple[float, float, int]]) -> None:
        """Capacity rows of `windows` (t1, t2, resource) over the jobs whose window lies inside."""
        lower, upper, cols, vals = [], [], [], []
        for t1, t2, resource in windows:
            inside = (self.arrival >= t1) & (self.deadline <= t2) & (self.upper[: self.n] > 0)
            jobs = np.nonzero(inside)[0]
            if jobs.size == 0:
                continue
            lower.append(-np.inf)
            upper.append(self.capacity[resource] * (t2 - t1))
            cols.append(self.u_start + jobs * self.resources + resource)
            vals.append(np.ones(jobs.size))
            self.windows.add((t1, t2, resource))
        if cols:
            self.add_rows(lower, upper, cols, vals)

    def certificate(self) -> float:
        """A lower bound on the objective's minimum from HiGHS's row duals, by weak duality (the
        jobs met are at most its negation)."""
        matrix = sp.vstack(self.rows).tocsr()
        lower, upper = np.concatenate(self.row_lower), np.concatenate(self.row_upper)
        duals = np.asarray(self.highs.getSolution().row_dual)
        # For min c'v s.t. lower <= Av <= upper, 0 <= v <= u: any y with y_i > 0 only where
        # lower_i is finite and y_i < 0 only where upper_i is finite gives
        # c'v >= sum_i y_i (lower_i if y_i > 0 else upper_i) + sum_j min(0, (c - A'y)_j) u_j.
        y = np.where((duals > 0) & ~np.isfinite(lower), 0.0, duals)
        y = np.where((y < 0) & ~np.isfinite(upper), 0.0, y)
        side = np.where(
            y > 0,
            np.where(np.isfinite(lower), lower, 0.0),
            np.where(np.isfinite(upper), upper, 0.0),
        )
        reduced = self.cost - matrix.T @ y
        return float(y @ side) + float(np.minimum(reduced, 0.0) @ self.upper)

    def separate(self, solution: np.ndarray, limit: int) -> list[tuple[float, float, int]]:
        """The `limit` windows [arrival_i, deadline_j] most violated by `solution`: the work of
        the jobs inside each, by prefix sums over the jobs in deadline order."""
        use = self.usage(solution)
        order = np.argsort(self.deadline, kind="stable")
        arrival, deadline, use = self.arrival[order], self.deadline[order], use[order]
        excess_of: list[np.ndarray] = []
        keys: list[tuple[float, float, int]] = []
        for t1 in np.unique(arrival):
            inside = np.cumsum(np.where((arrival >= t1)[:, None], use, 0.0), axis=0)
            length = deadline - t1
            scale = length[:, None] * self.capacity[None, :]
            excess = inside - scale
            rows, resources = np.nonzero((length[:, None] > 0) & (excess > 1e-6 * scale))
            for i, r in zip(rows.tolist(), resources.tolist(), strict=True):
                key = (float(t1), float(deadline[i]), r)
                if key not in self.windows:
                    keys.append(key)
                    excess_of.append(excess[i, r] / self.capacity[r])
        if not keys:
            return []
        top = np.argsort(-np.array(excess_of), kind="stable")[:limit]
        return [keys[i] for i in top]


class WindowCounts:
    """Count rows: in a window W, the met jobs inside it are whole jobs, so at most K_W of them,
    the most whose least use of a pooled resource fits its capacity over W (docs/ceiling.md,
    "Count rows"). Two pooled resources: the instance time of all types together (each layer at
    its least alone latency over the types and cuts) and, with a limit, the bandwidth (each
    layer's fewest bytes). Separated over the windows the LP already holds."""

    def __init__(self, lp: Relaxation) -> None:
        self.least = np.array([_least_use(b, lp.types) for b in lp.blocks])  # [jobs, pooled]
        self.capacity = np.array([lp.capacity[: lp.types].sum(), *lp.capacity[lp.types :]])
        self.added: set[tuple[float, float]] = set()

    def limit(self, lp: Relaxation, t1: float, t2: float) -> tuple[np.ndarray, int]:
        """The jobs that may count inside [t1, t2], and the most of them that fit."""
        jobs = np.flatnonzero((lp.arrival >= t1) & (lp.deadline <= t2) & (lp.upper[: lp.n] > 0))
        most = jobs.size
        for r, capacity in enumerate(self.capacity):
            used = np.cumsum(np.sort(self.least[jobs, r]))
            # Generous by a relative 1e-9: rounding may only loosen the row.
            fits = int(np.count_nonzero(used <= capacity * (t2 - t1) * (1 + 1e-9) + 1e-12))
            most = min(most, fits)
        return jobs, most

    def add_violated(self, lp: Relaxation, solution: np.ndarray, limit: int) -> int:
        """Add the `limit` count rows of the LP's windows most violated by `solution`; how many."""
        x = solution[: lp.n]
        found = []
        for t1, t2 in {(a, b) for a, b, _ in lp.windows} - self.added:
            jobs, most = self.limit(lp, t1, t2)
            excess = float(x[jobs].sum()) - most
            if most < jobs.size and excess > 1e-6:
                found.append((excess, t1, t2, jobs, most))
        found.sort(key=lambda f: -f[0])
        rows = found[:limit]
        if rows:
            lp.add_rows(
                [-np.inf] * len(rows),
                [float(most) for *_, most in rows],
                [jobs for *_, jobs, _ in rows],
                [np.ones(jobs.size) for *_, jobs, _ in rows],
            )
            self.added.update((t1, t2) for _, t1, t2, _, _ in rows)
        return len(rows)


def _least_use(block: _Block, types: int) -> list[float]:
    """A job's least instance time over all types together and (with a limit) its fewest bytes:
    each class's layers on their cheapest type for each."""
    size = block.upper[::types]
    time = np.stack([coef for _, coef in block.use[:types]], axis=1)
    least = [float(size @ time.min(axis=1))]
    if len(block.use) > types:
        least.append(float(size @ block.use[types][1].reshape(-1, types).min(axis=1)))
    return least


def _highs(threads: int) -> highspy.Highs:
    """A silent HiGHS: the first one of a process prints a banner on the C-level stdout, which
    would mix with what a command prints there (a report's Markdown, a benchmark's table)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 1)
        try:
            highs = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", threads)
    return highs


@dataclass(frozen=True)
class Solved:
    """What the separation rounds proved: a lower bound on the LP's minimum, and how."""

    lower: float  # the best certificate (or the caller's bound when no round finished)
    status: str  # converged, time_limit, "solver: ..." (Bound.status)
    rounds: int
    windows: int
    solution: np.ndarray | None  # the columns' values of the last LP solved (None: none was)


def check_time_limit(time_limit_s: float) -> None:
    """A relaxation's time limit must be positive (0 would prove nothing)."""
    if not time_limit_s > 0:
        raise ValueError(f"the bound's time limit must be positive, got {time_limit_s}")


def solve_by_separation(
    lp: Relaxation,
    lower: float,
    *,
    started: float,
    time_limit_s: float,
    per_round: int,
    counts: WindowCounts | None = None,
) -> Solved:
    """Solve `lp` round after round, adding its `per_round` most violated windows each time,
    and once none is, the `per_round` most violated `counts` rows, until neither is violated or
    `time_limit_s` after `started` (perf_counter). Every round is a relaxation, so each
    certificate is a proven lower bound on the minimum; the best of them and `lower` (proven
    without the LP) is kept."""
    rounds = 0
    status = "time_limit"
    solution = None
    while (left := time_limit_s - (time.perf_counter() - started)) > 0:
        lp.highs.setOptionValue("time_limit", left)
        lp.highs.run()
        model_status = lp.highs.getModelStatus()
        if model_status != highspy.HighsModelStatus.kOptimal:
            if model_status != highspy.HighsModelStatus.kTimeLimit:
                status = f"solver: {lp.highs.modelStatusToString(model_status)}"
            break
        rounds += 1
        lower = max(lower, lp.certificate())
        solution = np.asarray(lp.highs.getSolution().col_value)
        windows = lp.separate(solution, per_round)
        if windows:
            lp.add_windows(windows)
        elif counts is None or not counts.add_violated(lp, solution, per_round):
            status = "converged"
            break
    return Solved(
        lower=lower, status=status, rounds=rounds, windows=len(lp.windows), solution=solution
    )


def relaxation_bound(
    instance: Instance,
    *,
    time_limit_s: float,
    threads: int = 1,
    per_round: int = 200,
    counts: bool = True,
) -> Bound:
    """The proven upper bound on the deadlines met of `instance` (docs/ceiling.md); `counts`:
    with the windows' count rows (WindowCounts)."""
    check_time_limit(time_limit_s)
    started = time.perf_counter()
    lp = Relaxation(instance, threads)
    fit = float(np.count_nonzero(lp.upper[: instance.n_jobs]))
    solved = solve_by_separation(
        lp,
        -fit,
        started=started,
        time_limit_s=time_limit_s,
        per_round=per_round,
        counts=WindowCounts(lp) if counts else None,
    )
    best = -solved.lower
    return Bound(
        met=int(np.floor(best + 1e-6)),
        value=best,
        jobs=instance.n_jobs,
        status=solved.status,
        rounds=solved.rounds,
        windows=solved.windows,
        seconds=time.perf_counter() - started,
        shares=np.zeros(instance.n_jobs)
        if solved.solution is None
        else np.clip(solved.solution[: instance.n_jobs], 0.0, 1.0),
    )
