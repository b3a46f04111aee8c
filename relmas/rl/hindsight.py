"""Learning which jobs to give up from labels of the future (issue 50, item 3), as LRB and Parrot
learn Belady's optimum: a classifier over online features of each present job, trained on the
clairvoyant planner's decisions at the states the current policy visits (DAgger).

The label of a present job at a state is whether the ceiling's LP over what is left of the
present jobs plus the trace's own next `horizon_jobs` arrivals serves it (relmas.policies.planner,
`served` with `RealFuture`; where jobs carry service targets, the LP leaves the tenants least
short of them first): the planner fed the real future keeps it. Round 0 labels the states
of the rule alone (every job kept); each later round labels the states of the keeper learned so
far, and the classifier is refitted on every label so far. The learned keeper gives up a present
job whose predicted chance of being served is below `threshold`; the placed rule schedules the
rest (`GivingUp`). It reads nothing of the future: only the online features of
`relmas.rl.keeper`, whose kernels it acts by.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from torch import nn

from relmas.policies.base import Policy
from relmas.policies.planner import GivingUp, Keeper, PlannerConfig, RealFuture, served
from relmas.rl.determinism import deterministic_torch
from relmas.rl.keeper import (
    FEATURES,
    SERVICE_FEATURES,
    KeeperWeights,
    KernelKeeper,
    keeper_features,
)
from relmas.sim.costs import CostTables
from relmas.sim.engine import Engine
from relmas.sim.system import System


def job_features(engine: Engine, present: np.ndarray) -> np.ndarray:
    """float32[present, FEATURES]: each present job's online features, as the keeper's kernel
    computes them."""
    T, S = engine.kernel_tables, engine.state
    return keeper_features(T, S, present.astype(np.int64)).astype(np.float32)


def keep_all(engine: Engine, present: np.ndarray) -> np.ndarray:
    """The rule alone: every job kept (round 0's states)."""
    return np.ones(present.size, dtype=bool)


class Hindsight:
    """A keeper that records, at each state it is asked about, the present jobs' features and
    the clairvoyant planner's labels, and keeps what `acting` keeps: the states are the acting
    policy's (DAgger), the labels the future's."""

    def __init__(self, acting: Keeper, config: PlannerConfig) -> None:
        self.acting = acting
        self.future = RealFuture(config.horizon_jobs)
        self.config = config
        self.features: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []

    def __call__(self, engine: Engine, present: np.ndarray) -> np.ndarray:
        self.features.append(job_features(engine, present))
        self.labels.append(served(engine, present, self.future(engine, 0), self.config))
        return self.acting(engine, present)


class Classifier(nn.Module):
    """P(served) of a present job from its features: a small MLP, inputs standardised by the
    training labels' statistics.

    The service features enter the hidden layer through a layer of their own, made after the
    others and without a bias: where no job carries a target they are 0 once standardised, and
    the classifier (its initial weights, its fit) is the one of a keeper without them. A
    service feature that did not vary in training is exported with no weight, so that such a
    keeper reads nothing of a deficit it never saw when it meets a trace with targets."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, hidden: int = 32) -> None:
        """`mean`, `std`: the training features' statistics (a std of 0: a constant feature)."""
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std + 1e-6, dtype=torch.float32))
        self.register_buffer("varies", torch.as_tensor(std > 0))
        self.plain = len(FEATURES) - SERVICE_FEATURES
        self.first = nn.Linear(self.plain, hidden)
        self.out = nn.Linear(hidden, 1)
        self.service = nn.Linear(SERVICE_FEATURES, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plain, service = x[:, : self.plain], x[:, self.plain :]
        plain = (plain - self.mean[: self.plain]) / self.std[: self.plain]
        service = (service - self.mean[self.plain :]) / self.std[self.plain :]
        return self.out(torch.relu(self.first(plain) + self.service(service))).squeeze(-1)

    def weights(self, threshold: float) -> KeeperWeights:
        """This classifier as the keeper's kernels read it, giving up below `threshold`."""

        def values(tensor: torch.Tensor) -> tuple:
            return tuple(tensor.detach().double().numpy().tolist())

        service = self.service.weight * self.varies[self.plain :]
        first = torch.cat([self.first.weight, service], dim=1)
        return KeeperWeights(
            first=tuple(tuple(row) for row in values(first)),
            first_bias=values(self.first.bias),
            second=values(self.out.weight[0]),
            second_bias=float(self.out.bias.item()),
            mean=values(self.mean),
            std=values(self.std),
            threshold=threshold,
        )


@dataclass(frozen=True)
class HindsightConfig:
    """How the keeper is learned: DAgger rounds over the training traces, the fit's epochs."""

    rounds: int = 2
    fit_epochs: int = 200
    fit_learning_rate: float = 1e-2
    threshold: float = 0.5
    planner: PlannerConfig = PlannerConfig(samples=1)  # the labels' horizon and LP time limit
    seed: int = 0


def label_runs(
    system: System,
    tables: CostTables,
    traces: Iterable[pl.DataFrame],
    rule: Policy,
    acting: Keeper,
    config: PlannerConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of every state `acting` visits with `rule` on `traces`."""
    features, labels = [], []
    for jobs in traces:
        recorder = Hindsight(acting, config)
        Engine(system, tables, jobs).run(GivingUp(rule, recorder, "hindsight"))
        features += recorder.features
        labels += recorder.labels
    if not features:
        return np.zeros((0, len(FEATURES)), np.float32), np.zeros(0, bool)
    return np.concatenate(features), np.concatenate(labels)


def fit(features: np.ndarray, labels: np.ndarray, config: HindsightConfig) -> Classifier:
    """The classifier fitted to `labels` (full-batch Adam on the binary cross-entropy), the
    same on any core count (`deterministic_torch`)."""
    with deterministic_torch():
        torch.manual_seed(config.seed)
        model = Classifier(features.mean(axis=0), features.std(axis=0))
        optimiser = torch.optim.Adam(model.parameters(), lr=config.fit_learning_rate)
        x = torch.as_tensor(features)
        y = torch.as_tensor(labels, dtype=torch.float32)
        loss_of = nn.BCEWithLogitsLoss()
        for _ in range(config.fit_epochs):
            optimiser.zero_grad()
            loss = loss_of(model(x), y)
            loss.backward()
            optimiser.step()
    return model


def learn_keeper(
    system: System,
    tables: CostTables,
    traces: list[pl.DataFrame],
    rule: Policy,
    config: HindsightConfig,
) -> tuple[KeeperWeights | None, np.ndarray, np.ndarray]:
    """The keeper learned over `config.rounds` DAgger rounds on `traces` with `rule` (a rule
    baseline with its placement), with every (features, labels) it was fitted to; None where no
    state had a job to label."""
    acting: Keeper = keep_all
    features = np.zeros((0, len(FEATURES)), np.float32)
    labels = np.zeros(0, bool)
    weights = None
    for _ in range(config.rounds):
        x, y = label_runs(system, tables, traces, rule, acting, config.planner)
        features, labels = np.concatenate([features, x]), np.concatenate([labels, y])
        if labels.size == 0:
            return None, features, labels
        weights = fit(features, labels, config).weights(config.threshold)
        acting = KernelKeeper(weights.arrays())
    return weights, features, labels


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve (Mann-Whitney U; ties count a half): the chance that a
    served job scores above one given up. NaN without both classes."""
    positive, negative = scores[labels], scores[~labels]
    if positive.size == 0 or negative.size == 0:
        return float("nan")
    ranks = pl.Series(np.concatenate([positive, negative])).rank("average").to_numpy()
    u = ranks[: positive.size].sum() - positive.size * (positive.size + 1) / 2
    return float(u / (positive.size * negative.size))
