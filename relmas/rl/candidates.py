"""Which jobs the RELMAS agent chooses among at a decision point: the jobs of the candidate slots.

The candidates are not simply the M earliest deadlines: under overload those are jobs that can no
longer make it, and serving them first is what makes EDF collapse. The slots are, in this order:

- slot 0, the *reference*: the job the reference baseline (a rule baseline with its placement,
  `relmas.policies.reference`) starts now, empty when it waits; its action (slot 0, the type of its
  instance), or wait, is the *teacher's* action (`relmas.rl.teacher`), so that the agent can
  always do exactly what that baseline does (tested: schedule for schedule);
- `candidates` slots: the feasible jobs with the least remaining work (SJF among feasible jobs);
- `candidates` slots: the feasible jobs with the earliest deadlines (EDF among feasible jobs);
- one slot: the hopeless job with the least remaining work (work for otherwise idle instances);
- with service levels (`ObservationSettings.service`), `candidates` more slots: the feasible jobs
  of the tenants furthest below their targets (deficit = target - the tenant's deadline-hit rate
  so far; a job without a target ranks after every job with one), ties by least remaining work.

*Feasible* = it can still meet its deadline: slack >= remaining work at full speed on the best
types (`relmas.policies.triage`, shared with the rule baselines).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from relmas.policies.triage import feasible
from relmas.sim import access
from relmas.sim.engine_kernels import State, Tables


@njit(cache=True, inline="always")
def deficit(S: State, job: int, rates: np.ndarray) -> float:
    """The job's target minus its tenant's rate so far (`rates`, `service_rates`'), negative
    above the target, NaN without a target: how far the tenant is below what the job counts
    towards."""
    return access.job_target(S, job) - rates[access.job_tenant(S, job)]


@njit(cache=True)
def _before(
    key: float, tie: float, job: int, other_key: float, other_tie: float, other: int
) -> bool:
    """(key, tie, job) ranks before (other_key, other_tie, other), lexicographically."""
    if key != other_key:
        return key < other_key
    if tie != other_tie:
        return tie < other_tie
    return job < other


@njit(cache=True, inline="always")  # a call would count references of its three arrays
def _insert(
    keys: np.ndarray, ties: np.ndarray, jobs: np.ndarray, key: float, tie: float, job: int
) -> None:
    """Insert (key, tie, job) into the ascending top-k arrays (empty entries: job -1) if it ranks
    (ties of key: by `tie`, then lower job first)."""
    k = keys.shape[0]
    if jobs[k - 1] >= 0 and not _before(key, tie, job, keys[k - 1], ties[k - 1], jobs[k - 1]):
        return
    i = k - 1
    while i > 0 and (
        jobs[i - 1] < 0 or _before(key, tie, job, keys[i - 1], ties[i - 1], jobs[i - 1])
    ):
        keys[i] = keys[i - 1]
        ties[i] = ties[i - 1]
        jobs[i] = jobs[i - 1]
        i -= 1
    keys[i] = key
    ties[i] = tie
    jobs[i] = job


@njit(cache=True, inline="always")  # no call overhead per step
def pick_candidates(
    T: Tables, S: State, reference: int, slots: np.ndarray, rates: np.ndarray
) -> tuple[int, int, float]:
    """The slots' jobs (the module doc's rankings after the `reference` job). With service
    levels (`rates`, the tenants' rates so far, not empty) also the deficit ranking. Returns
    (ready jobs, feasible ready jobs, their remaining work)."""
    now = access.now(S)
    n_slots = slots.shape[0]
    service = rates.shape[0] > 0
    k = (n_slots - 2) // (3 if service else 2)
    short_key, short_tie = np.full(k, np.inf), np.zeros(k)
    short_job = np.full(k, -1, dtype=np.int64)
    early_key, early_tie = np.full(k, np.inf), np.zeros(k)
    early_job = np.full(k, -1, dtype=np.int64)
    hopeless_key, hopeless_job = np.inf, -1  # the top 1: no arrays to insert into
    k_deficit = k if service else 0
    deficit_key, deficit_tie = np.full(k_deficit, np.inf), np.zeros(k_deficit)
    deficit_job = np.full(k_deficit, -1, dtype=np.int64)
    feasible_jobs = 0
    feasible_work = 0.0
    queue = access.ready_count(S)
    for i in range(queue):
        job = access.ready_job(S, i)
        remaining = T.remaining_work[access.job_next_row(S, job)]
        deadline = access.job_deadline(S, job)
        if feasible(now, remaining, deadline):
            feasible_jobs += 1
            feasible_work += remaining
            _insert(short_key, short_tie, short_job, remaining, 0.0, job)
            _insert(early_key, early_tie, early_job, deadline, 0.0, job)
            if service:
                gap = deficit(S, job, rates)  # furthest below first; no target (NaN) after all
                key = -gap if gap == gap else np.inf
                _insert(deficit_key, deficit_tie, deficit_job, key, remaining, job)
        elif hopeless_job < 0 or _before(remaining, 0.0, job, hopeless_key, 0.0, hopeless_job):
            hopeless_key, hopeless_job = remaining, job
    slots[0] = reference
    slots[1 : 1 + k] = short_job
    slots[1 + k : 1 + 2 * k] = early_job
    slots[1 + 2 * k] = hopeless_job
    slots[2 + 2 * k : 2 + 2 * k + k_deficit] = deficit_job
    return queue, feasible_jobs, feasible_work
