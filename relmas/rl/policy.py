"""`relmas` and `relmas_resize`: the trained DQN schedulers behind the common Policy interface.

Each decision is one forward pass of the network (Numba, `GreedyPolicy`) on the observation of
`relmas.rl.observation`, its teacher rule's action favoured by the agent's `teacher_bonus`, and
starts at most one job (for `relmas_resize`, its next layer whole or cut into pieces, or the next
piece of a layer already cut): the engine then offers the next decision at the same instant if
instances are still idle, exactly as in training. Its energy per
decision is that of running the network on the accelerator recorded at training (`agent.json`),
so the simulator adds it to the system's energy.
"""

from __future__ import annotations

from pathlib import Path

from relmas.errors import InputError
from relmas.policies.base import Policy, register
from relmas.rl.agent import AGENT_FILE, deployed, load_agent
from relmas.rl.network import GreedyPolicy
from relmas.rl.observation import Observer
from relmas.sim.engine import DecisionView, Engine


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
        self.decision_energy_j = float(self.info.decision_cost["energy_j"])
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
        cut_pieces = engine.tables.pieces.most_pieces if self.resize else ()
        try:
            self.greedy = deployed(self.info, self.network, self.observer.layout, cut_pieces)
        except KeyError as error:
            raise InputError(path, "teacher", "a slot rule", error.args[0]) from None

    def decide(self, view: DecisionView) -> list[tuple[int, int, int]]:
        seen = self.observer.observe(view)
        return self.observer.assignments(self.greedy(seen.obs, seen.mask))


@register("relmas_resize")
class RelmasResizePolicy(RelmasPolicy):
    """A trained resizing agent: each action also chooses how to cut the chosen layer."""

    name = "relmas_resize"
    resize = True
