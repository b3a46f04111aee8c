"""`relmas` and `relmas_resize`: the trained DQN schedulers behind the common Policy interface.

Each decision is one forward pass of the network (Numba, `GreedyPolicy`: the shared layers once
per (slot, type) pair) on the observation of `relmas.rl.observation`, its teacher's action (its
reference baseline's, `relmas.rl.teacher`) favoured by the agent's `teacher_bonus`, and starts at
most one job on an instance of the chosen type (for `relmas_resize`, its next layer whole or cut
into pieces, or the next piece of a layer already cut): the engine then offers the next decision
at the same instant if instances are still idle, exactly as in training. A decision scores only
the rows of its valid actions; its energy is that of running those rows of the network on the
accelerator recorded at training (`agent.json`, `relmas.rl.overhead`), and the simulator adds the
run's total to the system's energy. An agent with a learned keeper (`relmas.rl.keeper`) first
gives up the jobs it does not keep, at each decision point after new arrivals, as in training.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numba import njit

from relmas.errors import InputError
from relmas.hw import jit_cache
from relmas.policies.base import Policy, register
from relmas.policies.placement import ALL
from relmas.rl import acting as acting_module
from relmas.rl import network as network_module
from relmas.rl import teacher as teacher_module
from relmas.rl.acting import Actor, favoured_action, greedy_actor
from relmas.rl.agent import AGENT_FILE, deployed, load_agent
from relmas.rl.env import STEP_SOURCES, apply_action
from relmas.rl.keeper import (
    COUNT_PLANS,
    COUNT_SCORED,
    KeeperArrays,
    advance_keeping,
    give_up_unkept,
    no_keeper,
)
from relmas.rl.network import GreedyPolicy, greedy_decision
from relmas.rl.observation import ObservationArrays, Observer, observe
from relmas.rl.overhead import overhead_energy_j
from relmas.rl.travel import reaimed
from relmas.sim import access
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.engine_kernels import STATUS_DECISION, State, Tables, borrowed


@njit(cache=True)
def run_agent(
    T: Tables, S: State, V: ObservationArrays, A: Actor, K: KeeperArrays, scored: np.ndarray
) -> int:
    """Simulate to the end (or to a full timeline buffer) deciding with the agent: at each
    decision point the jobs its keeper `K` gives up, then the observation `V` (the reference
    baseline deciding first), the greedy action of `A`'s network with `A.bonus` on its teacher's —
    `RelmasPolicy.decide`'s steps, in one call. `scored[0]` counts the network's rows scored."""
    T, S, V, A, K, scored = borrowed((T, S, V, A, K, scored))
    obs, mask = V.obs, V.mask
    while True:
        status = advance_keeping(T, S, K)
        if status != STATUS_DECISION:
            return status
        observe(V)
        favoured = favoured_action(A, obs, mask)
        action, rows = greedy_decision(A.network, obs, mask, favoured, A.bonus)
        scored[0] += rows
        if action < 0:
            raise RuntimeError("no valid action in the mask: the observation broke its contract")
        apply_action(T, V.P, S, V.slots, mask.shape[0], action)


# The cached kernel embeds everything it calls: recompile when one of these sources changes.
jit_cache.refresh(
    run_agent,
    STEP_SOURCES + (network_module, teacher_module, acting_module, sys.modules[__name__]),
    stamp="relmas-rl-policy.sha256",
)


@register("relmas")
class RelmasPolicy(Policy):
    """A trained agent (`agent`: its training directory) scheduling greedily."""

    name = "relmas"
    resize = False  # whether its agent must have been trained to cut layers

    def __init__(
        self,
        seed: int = 0,
        agent: str | Path | None = None,
        reference: str | None = None,
        reference_placement: str = ALL,
    ) -> None:
        """`reference` (with `reference_placement`): deploy the agent re-aimed at that rule
        (`relmas.rl.travel`), on a scenario it was not trained on; None: as trained."""
        if agent is None:
            raise InputError(None, "--agent", "a trained RELMAS agent directory", "none given")
        self.directory = Path(agent)
        self.info, self.network = load_agent(self.directory)
        if reference is not None:
            self.info = reaimed(self.info, reference, reference_placement)
        if self.info.observation.resize != self.resize:
            command = f"relmas train --policy {self.name}"
            expected = f"an agent trained for {self.name} ({command})"
            raise InputError(
                self.directory / AGENT_FILE,
                "observation.resize",
                expected,
                self.info.observation.resize,
            )
        self.rows_scored = np.zeros(1, dtype=np.int64)  # by the network in this run
        self.observer: Observer | None = None
        self.greedy: GreedyPolicy | None = None  # the network favouring its teacher, per engine

    def reset(self, engine: Engine) -> None:
        path = self.directory / AGENT_FILE
        if engine.system.instance_types != self.info.instance_types:
            expected = (
                f"an agent trained on this system's instances {list(engine.system.instance_types)}"
            )
            raise InputError(path, "instance_types", expected, list(self.info.instance_types))
        if self.resize and engine.split_variants != self.info.split_variants:
            expected = f"an agent trained on these piece tables' cuts {list(engine.split_variants)}"
            raise InputError(path, "split_variants", expected, list(self.info.split_variants))
        self.observer = Observer(engine, self.info.observation)
        keeper = self.info.keeper
        self.keeper = keeper.arrays() if keeper is not None else no_keeper()
        self.rows_scored[0] = 0
        cut_pieces = engine.tables.pieces.most_pieces if self.resize else ()
        try:
            self.greedy = deployed(self.info, self.network, self.observer.layout, cut_pieces)
        except KeyError as error:
            raise InputError(path, "teacher", "its reference baseline", error.args[0]) from None

    def decide(self, view: DecisionView) -> list[tuple[int, int, int]]:
        engine = view.engine
        give_up_unkept(engine.kernel_tables, engine.state, self.keeper)
        if access.ready_count(engine.state) == 0:  # it gave every ready job up: wait
            return []
        seen = self.observer.observe(view)
        action, rows = self.greedy.decide(seen.obs, seen.mask)
        self.rows_scored[0] += rows
        return self.observer.assignments(action)

    def overhead_counts(self) -> dict[str, float]:
        """What its networks computed in the run: rows the agent's network scored, plans its
        keeper made and present jobs it scored (`relmas.rl.overhead.PAID_PER`)."""
        return {
            "rows_scored": float(self.rows_scored[0]),
            "keeper_plans": float(self.keeper.counts[COUNT_PLANS]),
            "keeper_jobs_scored": float(self.keeper.counts[COUNT_SCORED]),
        }

    def overhead_energy_j(self, decisions: int) -> float:
        """The networks' energy over the run: each decision's by the rows it scored, each
        keeper plan's by the jobs it scored."""
        counts = {"decisions": float(decisions), **self.overhead_counts()}
        return overhead_energy_j(self.info.decision_cost, counts)

    def run_to_completion(self, engine: Engine) -> bool:
        """The whole trace in `run_agent`: the same decisions as `decide`'s (tested), without a
        call from Python per decision."""
        actor = greedy_actor(self.greedy, self.observer.layout)
        engine.run_jitted(run_agent, self.observer.arrays, actor, self.keeper, self.rows_scored)
        return True


@register("relmas_resize")
class RelmasResizePolicy(RelmasPolicy):
    """A trained resizing agent: each action also chooses how to cut the chosen layer."""

    name = "relmas_resize"
    resize = True
