"""`relmas` and `relmas_resize`: the trained DQN schedulers behind the common Policy interface.

Each decision is one forward pass of the network (Numba, `GreedyPolicy`: the shared layers once
per (slot, type) pair) on the observation of `relmas.rl.observation`, its teacher's action (its
reference baseline's, `relmas.rl.teacher`) favoured by the agent's `teacher_bonus`, and starts at
most one job on an instance of the chosen type (for `relmas_resize`, its next layer whole or cut
into pieces, or the next piece of a layer already cut): the engine then offers the next decision
at the same instant if instances are still idle, exactly as in training. A decision scores only
the rows of its valid actions; its energy is that of running those rows of the network on the
accelerator recorded at training (`agent.json`, `relmas.rl.overhead`), and the simulator adds the
run's total to the system's energy.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numba import njit

from relmas.errors import InputError
from relmas.hw import jit_cache
from relmas.policies import placement, triage
from relmas.policies import rules as baseline_rules
from relmas.policies.base import Policy, register
from relmas.rl import env as env_module
from relmas.rl import network as network_module
from relmas.rl import observation as observation_module
from relmas.rl.agent import AGENT_FILE, deployed, load_agent
from relmas.rl.env import apply_action
from relmas.rl.network import GreedyPolicy, greedy_decision, network_arguments
from relmas.rl.observation import Observer, Reference, observe, teacher_action
from relmas.rl.overhead import overhead_energy_j
from relmas.rl.teacher import no_teacher_arguments
from relmas.sim import access
from relmas.sim import kernels as engine_kernels
from relmas.sim import service as service_module
from relmas.sim.engine import DecisionView, Engine
from relmas.sim.kernels import STATUS_DECISION, Pieces, State, Tables, advance


@njit(cache=True)
def run_agent(
    T: Tables,
    S: State,
    P: Pieces,
    R: Reference,
    scales: np.ndarray,
    tenant_target: np.ndarray,
    slots: np.ndarray,
    obs: np.ndarray,
    mask: np.ndarray,
    params: np.ndarray,
    layout: np.ndarray,
    n_heads: int,
    blocks: np.ndarray,
    parts: np.ndarray,
    row_parts: np.ndarray,
    n_actions: int,
    bonus: float,
    sizes: np.ndarray,
    cut_pieces: np.ndarray,
    scored: np.ndarray,
) -> int:
    """Simulate to the end (or to a full timeline buffer) deciding with the agent: at each
    decision point the observation (the reference baseline `R` deciding first), the network's
    greedy action with `bonus` on its teacher's (`sizes`, `cut_pieces`: `teacher_action`'s
    arguments) — `RelmasPolicy.decide`'s steps, in one call. `scored[0]` counts the network's
    rows scored."""
    while True:
        status = advance(T, S)
        if status != STATUS_DECISION:
            return status
        observe(T, P, S, R, scales, tenant_target, obs, slots, mask)
        favoured = -1
        if bonus > 0.0:
            favoured = teacher_action(obs, mask, sizes, cut_pieces)
        action, rows = greedy_decision(
            params, layout, n_heads, blocks, parts, row_parts, n_actions, obs, mask, favoured, bonus
        )
        scored[0] += rows
        if action < 0:
            raise RuntimeError("no valid action in the mask: the observation broke its contract")
        apply_action(T, P, S, slots, mask.shape[0], action)


# The cached kernel embeds everything it calls: recompile when one of these sources changes.
jit_cache.refresh(
    run_agent,
    (engine_kernels, access, triage, placement, baseline_rules, service_module)
    + (observation_module, env_module, network_module, sys.modules[__name__]),
    stamp="relmas-rl-policy.sha256",
)


@register("relmas")
class RelmasPolicy(Policy):
    """A trained agent (`agent`: its training directory) scheduling greedily."""

    name = "relmas"
    resize = False  # whether its agent must have been trained to cut layers

    def __init__(self, seed: int = 0, agent: str | Path | None = None) -> None:
        if agent is None:
            raise InputError(None, "--agent", "a trained RELMAS agent directory", "none given")
        self.directory = Path(agent)
        self.info, self.network = load_agent(self.directory)
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
        self.rows_scored[0] = 0
        cut_pieces = engine.tables.pieces.most_pieces if self.resize else ()
        try:
            self.greedy = deployed(self.info, self.network, self.observer.layout, cut_pieces)
        except KeyError as error:
            raise InputError(path, "teacher", "its reference baseline", error.args[0]) from None

    def decide(self, view: DecisionView) -> list[tuple[int, int, int]]:
        seen = self.observer.observe(view)
        action, rows = self.greedy.decide(seen.obs, seen.mask)
        self.rows_scored[0] += rows
        return self.observer.assignments(action)

    def overhead_energy_j(self, decisions: int) -> float:
        """The network's energy over the run: each decision's by the rows it scored."""
        return overhead_energy_j(self.info.decision_cost, decisions, int(self.rows_scored[0]))

    def run_to_completion(self, engine: Engine) -> bool:
        """The whole trace in `run_agent`: the same decisions as `decide`'s (tested), without a
        call from Python per decision."""
        observer, greedy = self.observer, self.greedy
        layout = observer.layout
        favour = greedy.favour
        teacher = no_teacher_arguments(layout) if favour is None else favour.kernel_arguments
        engine.run_jitted(
            run_agent,
            engine.kernel_pieces,
            observer.reference,
            observer.scales,
            observer.tenant_target,
            observer.slots,
            np.zeros(layout.size, dtype=np.float32),
            np.zeros(layout.actions, dtype=bool),
            *network_arguments(greedy.weights),
            greedy.bonus,
            *teacher,
            self.rows_scored,
        )
        return True


@register("relmas_resize")
class RelmasResizePolicy(RelmasPolicy):
    """A trained resizing agent: each action also chooses how to cut the chosen layer."""

    name = "relmas_resize"
    resize = True
