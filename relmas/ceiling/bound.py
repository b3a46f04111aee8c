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

from relmas.ceiling.instance import Instance, alone_latency
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
    use: list[tuple[np.ndarray, np.ndarray]]  # per resource: coef . cols
    shortest: float  # the chain's least time, layers at their fastest
    rows: _Rows  # its structure rows, for any job it is the block of
    use_upper: np.ndarray  # float64[resources]: the most of each resource the job can use


# Where an entry of a block's row goes (`_Rows.column`): a column of the block (local index), or
# its job's x_j; u_jr is r itself (0, 1, ...).
_LOCAL, _X = -1, -2


@dataclass(frozen=True)
class _Rows:
    """A block's structure rows as a template (`Relaxation._structure_rows` places it per job),
    in order: per class, `coef . cols - n_c x_j = 0` (its layers are all placed); the chain
    `coef . cols - (deadline - arrival) x_j <= 0`; per resource, `coef . cols - u_jr = 0`."""

    local: np.ndarray  # int64[entries]: the block's local column (where column is _LOCAL)
    column: np.ndarray  # int64[entries]: _LOCAL, _X or the resource r of u_jr
    value: np.ndarray  # float64[entries]; the chain's x_j entry is the job's own (`span`)
    span: np.ndarray  # bool[entries]: the entry is -(deadline - arrival) of the job
    length: np.ndarray  # int64[rows]: entries per row
    lower: np.ndarray  # float64[rows]; every upper side is 0


def _layer_costs(
    instance: Instance, unit: float, per_byte: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per layer and type, float64[ops, types] each: the least busy time, bytes and chain time of
    the layer per unit placed there.

    Whole on type k, the layer costs its alone latency and bytes there. Cut by variant v into P
    pieces, a share f of its pieces on type k costs at least f * P * (cheapest piece on k) of time
    and bytes, and the layer holds its chain at least max over pieces of the fastest piece time
    (in parallel at best) — at most what any share of it on k is charged. So the least of the
    whole and every cut, per type, keeps the LP a relaxation with one column per type. The cuts
    depend on the layer's cost row only: computed once per row present, all rows at once.
    """
    time = instance.alone_s / unit
    moved = instance.dram_bytes * per_byte
    chain = time.copy()
    pieces = instance.pieces
    if pieces is None or len(pieces.variants) == 1:
        return time, moved, chain
    rows, of_op = np.unique(instance.op_row, return_inverse=True)
    for v in range(1, len(pieces.variants)):
        count = pieces.count[rows, v]
        columns = pieces.offset[v] + np.arange(count.max())
        real = (np.arange(columns.size) < count[:, None])[:, :, None]  # [rows, pieces, 1]
        demand = pieces.demand_bps[rows[:, None], columns]
        alone = alone_latency(
            pieces.latency_s[rows[:, None], columns], demand, instance.bandwidth_bps
        )
        dram = pieces.dram_bytes[rows[:, None], columns]
        fastest = np.where(real, alone, np.inf).min(axis=1)  # [rows, types]
        fewest = np.where(real, dram, np.inf).min(axis=1)
        longest = np.where(real[:, :, 0], alone.min(axis=2), -np.inf).max(axis=1)  # [rows]
        time = np.minimum(time, (count[:, None] * fastest / unit)[of_op])
        moved = np.minimum(moved, (count[:, None] * fewest * per_byte)[of_op])
        chain = np.minimum(chain, (longest / unit)[of_op, None])
    return time, moved, chain


def _block(costs: tuple[np.ndarray, np.ndarray, np.ndarray], ops: range, resources: int) -> _Block:
    """The LP block of a job whose layers are `ops`, from the layers' `costs` (`_layer_costs`):
    its layers grouped into classes of equal costs, in order of first appearance (every job with
    the same layers left shares it)."""
    time, moved, chain = (cost[ops.start : ops.stop] for cost in costs)
    types = time.shape[1]
    joined = np.ascontiguousarray(np.concatenate([time, moved, chain], axis=1))
    keys = joined.view(np.dtype((np.void, joined.dtype.itemsize * joined.shape[1]))).ravel()
    _, first, of_layer = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the classes as they first appear
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    size = np.bincount(rank[of_layer], minlength=order.size).astype(np.float64)
    time, moved, chain = time[first[order]], moved[first[order]], chain[first[order]]
    n = size.size
    local = np.arange(n * types).reshape(n, types)
    use = [(local[:, k], time[:, k]) for k in range(types)]
    use += [(local.ravel(), moved.ravel())] * (resources - types)
    upper = np.repeat(size, types)
    return _Block(
        columns=n * types,
        upper=upper,
        use=use,
        shortest=float((size * chain.min(axis=1)).sum()),
        rows=_block_rows(local, size, chain, use),
        use_upper=np.array([float(coef @ upper[cols]) for cols, coef in use]),
    )


def _block_rows(
    local: np.ndarray, size: np.ndarray, chain: np.ndarray, use: list[tuple[np.ndarray, np.ndarray]]
) -> _Rows:
    """The structure rows of a block (`_Rows`): `local` its columns per class, `size` the
    classes' layer counts, `chain` their chain times per type, `use` its resource rows. Each row
    is its columns' entries, then one last entry (x_j's, or u_jr's); the class rows, one per
    class and alike but for their values, are laid out at once."""
    n, types = local.shape
    last = np.zeros((n, 1), dtype=np.int64)
    class_local = np.concatenate([local, last], axis=1).ravel()
    class_column = np.concatenate([np.full((n, types), _LOCAL), last + _X], axis=1).ravel()
    class_value = np.concatenate([np.ones((n, types)), -size[:, None]], axis=1).ravel()
    rows = [(local.ravel(), chain.ravel(), _X, 0.0)]  # the job's own span goes after the classes
    rows += [(c, v, r, -1.0) for r, (c, v) in enumerate(use)]
    length = np.array([types + 1] * n + [c.size + 1 for c, _, _, _ in rows], dtype=np.int64)
    span = np.zeros(int(length.sum()), dtype=bool)
    span[n * (types + 1) + rows[0][0].size] = True
    return _Rows(
        local=np.concatenate([class_local, *(np.append(c, 0) for c, _, _, _ in rows)]),
        column=np.concatenate(
            [class_column, *(np.append(np.full(c.size, _LOCAL), k) for c, _, k, _ in rows)]
        ),
        value=np.concatenate([class_value, *(np.append(v, x) for _, v, _, x in rows)]),
        span=span,
        length=length,
        lower=np.array([0.0] * n + [-np.inf] + [0.0] * len(use)),
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
        per_byte = 1.0 / (instance.bandwidth_bps * unit) if self.resources > types else 0.0
        costs = _layer_costs(instance, unit, per_byte)
        by_chain = {c: _block(costs, instance.ops(j), self.resources) for c, j in first_job.items()}
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
            upper[self.u(j, 0) : self.u(j, 0) + self.resources] = b.use_upper
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
        self._add_matrix(lower, upper, starts, np.concatenate(cols), np.concatenate(vals))

    def _add_matrix(
        self, lower, upper, starts: np.ndarray, cols: np.ndarray, vals: np.ndarray
    ) -> None:
        """Rows `lower <= vals . cols <= upper` in compressed form (row i: entries starts[i] to
        starts[i + 1])."""
        matrix = sp.csr_matrix((vals, cols, starts), shape=(len(starts) - 1, self.columns))
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
        """Each job's block rows (`_Rows`), placed at its columns."""
        cols, vals, lengths, lower = [], [], [], []
        for j, b in enumerate(self.blocks):
            t = b.rows
            placed = np.where(t.column == _X, j, self.u(j, 0) + t.column)
            cols.append(np.where(t.column == _LOCAL, self.block_start[j] + t.local, placed))
            vals.append(np.where(t.span, -(self.deadline[j] - self.arrival[j]), t.value))
            lengths.append(t.length)
            lower.append(t.lower)
        lower = np.concatenate(lower)
        starts = np.concatenate(([0], np.cumsum(np.concatenate(lengths))))
        self._add_matrix(
            lower, np.zeros(lower.size), starts, np.concatenate(cols), np.concatenate(vals)
        )

    def usage(self, solution: np.ndarray) -> np.ndarray:
        """float64[jobs, resources]: u_jr in `solution`."""
        return solution[self.u_start : self.u_start + self.n * self.resources].reshape(self.n, -1)

    def inside(self, t1: np.ndarray, t2: np.ndarray) -> np.ndarray:
        """bool[windows, jobs]: the jobs that may count whose [arrival, deadline] lies inside
        each window [t1, t2]."""
        counted = self.upper[: self.n] > 0
        return (self.arrival >= t1[:, None]) & (self.deadline <= t2[:, None]) & counted

    def add_windows(self, windows: list[tuple[float, float, int]]) -> None:
        """Capacity rows of `windows` (t1, t2, resource) over the jobs whose window lies inside."""
        if not windows:
            return
        t1, t2, _ = (np.array(side) for side in zip(*windows, strict=True))
        inside = self.inside(t1, t2)
        lower, upper, cols, vals = [], [], [], []
        for w in np.flatnonzero(inside.any(axis=1)):
            jobs = np.flatnonzero(inside[w])
            start, end, resource = windows[w]
            lower.append(-np.inf)
            upper.append(self.capacity[resource] * (end - start))
            cols.append(self.u_start + jobs * self.resources + resource)
            vals.append(np.ones(jobs.size))
            self.windows.add(windows[w])
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
        """The `limit` windows [arrival_i, deadline_j] most violated by `solution` and not in the
        LP yet: the work of the jobs inside each, by prefix sums over the jobs in deadline order;
        ties in the order of (start, end, resource)."""
        use = self.usage(solution)
        order = np.argsort(self.deadline, kind="stable")
        arrival, deadline, use = self.arrival[order], self.deadline[order], use[order]
        starts = np.unique(arrival)
        # the windows of several starts at once (as many as keep each array near a million
        # entries): the same sums, in the same order, as one start at a time
        chunk = max(1, 1_000_000 // max(use.size, 1))
        violated: list[tuple[np.ndarray, ...]] = []  # (start, job, resource, excess) per chunk
        for first in range(0, starts.size, chunk):
            t1 = starts[first : first + chunk, None, None]  # [starts, 1, 1]
            inside = np.cumsum(np.where(arrival[:, None] >= t1, use, 0.0), axis=1)
            length = deadline[:, None] - t1  # [starts, jobs, 1]
            scale = length * self.capacity
            excess = inside - scale
            s, i, r = np.nonzero((length > 0) & (excess > 1e-6 * scale))
            violated.append((first + s, i, r, excess[s, i, r] / self.capacity[r]))
        s, i, r, excess = (np.concatenate(column) for column in zip(*violated, strict=True))
        if excess.size == 0:
            return []
        # Only the most violated can be chosen: the `limit` plus as many as the LP holds (those
        # are skipped), and every tie of the last of them, in a stable order.
        most = min(excess.size, limit + len(self.windows))
        threshold = np.partition(excess, excess.size - most)[excess.size - most]
        candidates = np.flatnonzero(excess >= threshold)
        chosen: list[tuple[float, float, int]] = []
        for c in candidates[np.argsort(-excess[candidates], kind="stable")]:
            key = (float(starts[s[c]]), float(deadline[i[c]]), int(r[c]))
            if key not in self.windows:
                chosen.append(key)
                if len(chosen) == limit:
                    break
        return chosen


class WindowCounts:
    """Count rows of one LP: in a window W, the met jobs inside it are whole jobs, so at most K_W
    of them, the most whose least use of a pooled resource fits its capacity over W
    (docs/ceiling.md, "Count rows"). Two pooled resources: the instance time of all types together
    (each layer at its least alone latency over the types and cuts) and, with a limit, the
    bandwidth (each layer's fewest bytes). Separated over the windows the LP already holds."""

    def __init__(self, lp: Relaxation) -> None:
        self.lp = lp
        self.least = np.array([_least_use(b, lp.types) for b in lp.blocks])  # [jobs, pooled]
        self.capacity = np.array([lp.capacity[: lp.types].sum(), *lp.capacity[lp.types :]])
        self.order = np.argsort(self.least, axis=0, kind="stable")  # jobs by least use, per pooled
        self.added: set[tuple[float, float]] = set()
        # each window's jobs and the most of them that fit (`_limit`): they depend only on the
        # LP's jobs and column bounds, which never change, and every round asks again for the
        # windows not yet added
        self._limits: dict[tuple[float, float], tuple[np.ndarray, int]] = {}

    def _limit(self, windows: list[tuple[float, float]]) -> None:
        """Each window's jobs that may count inside it, and the most of them that fit
        (`_limits`): a resource's least uses summed in increasing order over each window's jobs,
        all windows at once (the others' entries are zeros, which leave the sums as they are)."""
        t1, t2 = (np.array(side) for side in zip(*windows, strict=True))
        inside = self.lp.inside(t1, t2)
        most = inside.sum(axis=1)
        for r, capacity in enumerate(self.capacity):
            order = self.order[:, r]
            ranked = inside[:, order]
            used = np.cumsum(np.where(ranked, self.least[order, r], 0.0), axis=1)
            # Generous by a relative 1e-9: rounding may only loosen the row.
            room = capacity * (t2 - t1) * (1 + 1e-9) + 1e-12
            most = np.minimum(most, np.count_nonzero(ranked & (used <= room[:, None]), axis=1))
        for w, window in enumerate(windows):
            self._limits[window] = np.flatnonzero(inside[w]), int(most[w])

    def add_violated(self, solution: np.ndarray, limit: int) -> int:
        """Add the `limit` count rows of the LP's windows most violated by `solution`; how many."""
        x = solution[: self.lp.n]
        found = []
        pending = list({(a, b) for a, b, _ in self.lp.windows} - self.added)
        unknown = [window for window in pending if window not in self._limits]
        if unknown:
            self._limit(unknown)
        for t1, t2 in pending:
            jobs, most = self._limits[t1, t2]
            excess = float(x[jobs].sum()) - most
            if most < jobs.size and excess > 1e-6:
                found.append((excess, t1, t2, jobs, most))
        found.sort(key=lambda f: -f[0])
        rows = found[:limit]
        if rows:
            self.lp.add_rows(
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
        elif counts is None or not counts.add_violated(solution, per_round):
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
