"""An agent deployed on a scenario it was not trained on (the report's generalisation pairs).

An agent brings two things from its scenario: a keeper, which gives jobs up from online features
of the state (slack, load, the work ahead: `relmas.rl.keeper`), and a network whose Q-values
were learned beside its own teacher, a rule with a placement chosen on that scenario's validation
traces. The rule and its placement belong to the scenario: where to run and in what order depends
on its bandwidth and mix. So a foreign deployment is chosen as every baseline's placement is, on
the deployment scenario's validation traces, between the agent as trained and the agent
*re-aimed*: its teacher and reference slot that scenario's best rule with its placement
(`relmas.evaluate.best_placed`), its keeper kept, its network following the new teacher (its
advantages were learned against the old one and do not transfer). No evaluation trace is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from relmas.rl.agent import AgentInfo
from relmas.rl.train import mean_metrics, validation_key

# the policy options of a re-aimed deployment (keyword arguments of `RelmasPolicy`)
REFERENCE, REFERENCE_PLACEMENT = "reference", "reference_placement"


def reaimed(info: AgentInfo, rule: str, placement: str) -> AgentInfo:
    """`info` re-aimed at `rule` with `placement`: its reference slot and its teacher that rule,
    which its network always follows (an infinite bonus); its keeper and network unchanged."""
    observation = replace(info.observation, reference=rule, placement=placement)
    return replace(info, observation=observation, teacher=rule, teacher_bonus=math.inf)


def deployment_options(
    best_rule: tuple[str, str],
    score: Callable[[Mapping[str, str]], Sequence[Mapping[str, Any]]],
) -> dict[str, str]:
    """The options of the better deployment on the validation traces: as trained (none) or
    re-aimed at `best_rule` (rule, placement). `score(options)` runs the agent with `options` on
    every validation trace and gives each run's metrics; ties keep the agent as trained."""
    aimed = {REFERENCE: best_rule[0], REFERENCE_PLACEMENT: best_rule[1]}
    as_trained, re_aimed = mean_metrics(score({})), mean_metrics(score(aimed))
    better = validation_key(re_aimed, "sla_rate") > validation_key(as_trained, "sla_rate")
    return aimed if better else {}
