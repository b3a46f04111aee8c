"""Replays an exact search's plan in the engine (an internal policy: it needs a plan, so it is not
in the catalog and users do not evaluate it).

Why the replay meets at least the plan's count: the plan's tasks start in the engine in the plan's
order of start, each as soon as every task that ends by its planned start has completed (the job's
previous layer and the instance's previous task among them) and its job has arrived; later tasks
wait for it. The plan's durations, releases and completion times are rounded up to its grid, and a
task alone with its bandwidth share takes exactly its alone latency, so by induction over that
order every task starts and ends no later than planned: the tasks it waits for ended no later than
planned, and these are the only ones. The tasks running together in the engine were running
together in the plan too, so they never demand more bandwidth than the plan's cumulative allowed
and every task runs at its alone rate. Each start happens at an event (an arrival, a completion)
or at the decision point of the task before it, where the engine stops anyway: its instance is
idle and its job ready. Jobs the plan leaves late start only once every planned task has ended
(they would otherwise take bandwidth from planned ones), greedily. Under firm deadlines the engine
drops a job past its deadline: the planned tasks of a dropped job (one the plan made late: the
others end no later than planned) are skipped as if done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from relmas.policies.base import Policy
from relmas.sim import access
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import TIME_TOL

if TYPE_CHECKING:
    from relmas.ceiling.plan import Plan
    from relmas.sim.costs import CostTables
    from relmas.sim.system import System


class PlanReplay(Policy):
    """Starts the plan's tasks in order of planned start, each once the tasks that end by its
    planned start have completed (and a timed task, an engine run's, not before its start time:
    the replay of a run's plan is that run again); then the late jobs, greedily."""

    name = "exact_replay"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        tasks = plan.tasks
        starts = np.array([t.start_s for t in tasks], dtype=np.float64)
        ends = np.array([t.end_s for t in tasks], dtype=np.float64)
        # Tasks in order of end; task k waits for those of the first waits[k] before it in order
        # (a task of no length would otherwise wait for itself, or for one it goes before).
        self._by_end = np.argsort(ends, kind="stable")
        self._waits = np.searchsorted(ends[self._by_end], starts, side="right")

    def reset(self, engine: Engine) -> None:
        ids = engine.jobs["job_id"].to_numpy()
        if not np.array_equal(ids, self.plan.job_id):
            raise ValueError("the plan is of another trace (job ids in engine order differ)")
        if self.plan.origin_s != engine.origin_s:  # its times would be read on another clock
            raise ValueError("the plan is of another trace (its clock's origin differs)")
        self._done = np.zeros(len(self.plan.tasks), dtype=bool)
        self._running = np.full(len(engine.system.instance_types), -1, dtype=np.int64)
        self._next = 0
        self._done_prefix = 0  # the first so many tasks in order of end are all done

    def _waited_for(self, task: int) -> bool:
        """Whether every task `task` waits for has completed. Tasks only ever complete, so the
        done prefix of the order of end only grows and only the tasks after it are looked at."""
        by_end, done = self._by_end, self._done
        while self._done_prefix < by_end.size and done[by_end[self._done_prefix]]:
            self._done_prefix += 1
        rest = by_end[self._done_prefix : self._waits[task]]
        return bool(done[rest[rest < task]].all())

    def _at(self, start_s: float) -> float:
        """When the engine may start a timed task planned at `start_s` (both on the engine's
        clock): then, less the engine's tolerance of event times."""
        return start_s - TIME_TOL * max(1.0, abs(start_s))

    def _stalled(self, view: DecisionView, starting: list) -> bool:
        """Whether waiting for a timed task's time would stall the engine: nothing starts now,
        nothing runs and no job is to arrive, so no event would come before it. In a run's own
        plan every start was at an event and this never holds; a plan that moved some of a
        run's tasks (relmas.ceiling.window_search) may have moved the completion a timed task
        started at, and then it starts now, earlier than the run started it."""
        return not starting and not access.can_wait(view.engine.state)

    def decide(self, view: DecisionView) -> list[tuple[int, ...]]:
        idle = set(view.idle_accelerators.tolist())
        for accelerator in idle:
            if self._running[accelerator] >= 0:
                self._done[self._running[accelerator]] = True
                self._running[accelerator] = -1
        ready = set(view.ready_jobs.tolist())
        out: list[tuple[int, ...]] = []
        tasks = self.plan.tasks
        while self._next < len(tasks):
            task = tasks[self._next]
            if access.job_dropped(view.engine.state, task.job):
                self._done[self._next] = True
                self._next += 1
                continue
            if task.instance not in idle or task.job not in ready:
                break
            if not self._waited_for(self._next):
                break
            if task.timed and view.now < self._at(task.start_s) and not self._stalled(view, out):
                break
            out.append((task.job, task.instance, task.split))
            idle.discard(task.instance)
            self._running[task.instance] = self._next
            self._next += 1
        if self._next == len(tasks) and (self._running < 0).all():
            late = sorted(ready)  # every planned task has ended: only late jobs are left
            out.extend(zip(late, sorted(idle), strict=False))
        return out


def replay(system: System, tables: CostTables, jobs: pl.DataFrame, plan: Plan) -> int:
    """Deadlines met when the engine runs `plan` (PlanReplay) on `jobs`."""
    return int(replay_met(system, tables, jobs, plan).sum())


def replay_met(system: System, tables: CostTables, jobs: pl.DataFrame, plan: Plan) -> np.ndarray:
    """Per job, in the engine's internal order, whether the replay of `plan` meets its deadline."""
    result = Engine(system, tables, jobs).run(PlanReplay(plan)).jobs
    met = dict(zip(result["job_id"].to_list(), result["met"].to_list(), strict=True))
    return np.array([bool(met[int(job)]) for job in plan.job_id])
