"""Guided generation: coverage and near misses steer what the generator draws next.

The guide lives in the coordinator (no jax). After each judged program it is told what
the program exercised (coverage.program_coverage) and how near its closest passing
target came to the oracle's threshold (the error/threshold margin). For each new
program it returns a `bias` for generator.generate:

- op weights: rarely drawn ops weigh more (1/sqrt(1 + count)), and ops seen in programs
  that produced a rarely seen fusion kind (kOutput, kInput, YNN...) get a bonus, so
  fusion decisions that happen seldom are steered towards;
- (generator version 2) kernel decisions the same way: ops seen in programs that reached
  a rarely reached decision of coverage.KERNEL_DECISIONS (a oneDNN or YNNPACK fusion, an
  in-place update, a kept while loop...) get a bonus, and large programs (generator.LARGE_P)
  are drawn up to LARGE_BOOST_CAP times as often while YNNPACK fusions and parallel
  partitions, which only they reach, are rare;
- producer>consumer pair weights: pairs drawn often weigh less, unseen pairs keep 1;
- dtype weights for the program's first inputs, the same way;
- with probability NEIGHBOUR_SHARE, a neighbour of a near miss: the program regrows
  from a prefix of one of the NEAR_MISSES programs with the largest margins (fresh
  inputs, a fresh tail). A bug that nearly showed often shows with other values or a
  slightly different consumer.

Every choice is drawn from an rng seeded by (seed, index), so a guided campaign is
reproducible given the same order of observations.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from xla_sentinel.campaign.coverage import Coverage
from xla_sentinel.core.graph import Graph

NEAR_MISSES = 16
NEIGHBOUR_SHARE = 0.3
# Below this margin a pass was not near at all (most programs sit around 1e-3..1e-1).
MIN_NEAR_MARGIN = 0.05
# Plain programs first: the weights mean little before a few programs are counted.
WARMUP = 8
FUSION_BONUS_CAP = 4.0
# Decisions only large programs reach (generator.LARGE_SHAPES), and how much more often
# large programs are drawn at most while those are rare.
LARGE_DECISIONS = ("fusion:ynn", "emitter:parallel")
LARGE_BOOST_CAP = 4.0


class Guide:
    def __init__(self, seed: int, decisions: bool = False) -> None:
        self.seed = seed
        # Steer by kernel decisions too (generator version 2; version 1's guided programs
        # stay what they were).
        self.decisions = decisions
        self.cov = Coverage()
        # op -> fusion kind -> programs holding the op whose default HLO had that kind.
        self.op_fusion: dict[str, Counter[str]] = defaultdict(Counter)
        # op -> kernel decision -> programs holding the op that reached it.
        self.op_decision: dict[str, Counter[str]] = defaultdict(Counter)
        self.near: list[tuple[float, int, Graph]] = []
        self.lock = threading.Lock()

    def observe(self, index: int, cov: dict[str, Any], graph: Graph | None,
                margin: float | None) -> None:
        """Record one judged program: its coverage, and its margin if it passed."""
        with self.lock:
            self.cov.add(cov)
            for op in cov.get("ops", {}):
                self.op_fusion[op].update(cov.get("fusion_kinds", {}).keys())
                self.op_decision[op].update(cov.get("kernel_decisions", []))
            if graph is not None and margin is not None and margin >= MIN_NEAR_MARGIN:
                self.near.append((margin, index, graph))
                self.near.sort(key=lambda t: -t[0])
                del self.near[NEAR_MISSES:]

    @staticmethod
    def _rarity(counts: Counter[str]) -> dict[str, float]:
        """Rarity of each key relative to the most common one: 0 for the commonest, up to
        FUSION_BONUS_CAP - 1."""
        top = max(counts.values(), default=0)
        return {k: min(FUSION_BONUS_CAP, top / (1 + c)) - 1 for k, c in counts.items()}

    def _op_weights(self) -> dict[str, float]:
        ops = self.cov.sections["ops"]
        rarity = self._rarity(self.cov.sections["fusion_kinds"])
        decision_rarity = self._rarity(self.cov.sections["kernel_decisions"]) if self.decisions else {}
        weights = {}
        for op, n in ops.items():
            seen = self.op_fusion.get(op, Counter())
            bonus = sum(rarity.get(k, 0.0) * c / n for k, c in seen.items()) if n else 0.0
            if decision_rarity and n:
                reached = self.op_decision.get(op, Counter())
                bonus += sum(decision_rarity.get(d, 0.0) * c / n for d, c in reached.items())
            weights[op] = (1 + max(bonus, 0.0)) / math.sqrt(1 + n)
        # Ops never drawn yet weigh most: 1 (count 0), plus no bonus to go by.
        return weights

    def _large_boost(self) -> float:
        """How many times LARGE_P large programs are drawn: up to LARGE_BOOST_CAP while the
        decisions only they reach are rare (never reached counts as rarest)."""
        seen = self.cov.sections["kernel_decisions"]
        top = max(seen.values(), default=0)
        rarest = max(min(LARGE_BOOST_CAP, top / (1 + seen[d])) for d in LARGE_DECISIONS)
        return max(1.0, rarest)

    def bias(self, index: int) -> dict[str, Any] | None:
        """The generator bias for program `index`, or None for a plain program."""
        with self.lock:
            if self.cov.programs < WARMUP:
                return None
            rng = np.random.default_rng([self.seed, index, 0x6D1E])
            bias: dict[str, Any] = {
                "ops": self._op_weights(),
                "pairs": {p: 1 / math.sqrt(1 + c) for p, c in self.cov.sections["op_pairs"].items()},
                "dtypes": {d: 1 / math.sqrt(1 + c) for d, c in self.cov.sections["dtypes"].items()},
            }
            if self.decisions:
                bias["large"] = self._large_boost()
            if self.near and rng.random() < NEIGHBOUR_SHARE:
                margins = np.array([m for m, _, _ in self.near])
                margin, parent, graph = self.near[int(rng.choice(len(self.near), p=margins / margins.sum()))]
                n = len(graph.nodes)
                bias.update(prefix=graph, keep=int(rng.integers(max(1, n // 2), n + 1)),
                            parent=parent, parent_margin=round(margin, 4))
            return bias

    @staticmethod
    def describe(bias: dict[str, Any] | None) -> dict[str, Any]:
        """What provenance records of a bias (the weights are not kept: they are large)."""
        if bias is None:
            return {"guided": False}
        out: dict[str, Any] = {"guided": True}
        if "prefix" in bias:
            out.update(neighbour_of=bias["parent"], keep=bias["keep"], parent_margin=bias["parent_margin"])
        return out
