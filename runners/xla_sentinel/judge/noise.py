"""The noise model of one program as the judge reads it: its samples (the float64 program
with every op perturbed by one rounding, worker/handlers.py) and which outputs may
overflow legally, drawn once, when a rule first needs them, and shared by every
configuration, invariant and cross-check judged on the program."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

# Each sample is one list of outputs, in the program's output order.
Samples = list[list[np.ndarray]]


@dataclass(frozen=True)
class NoiseDraw:
    """What one draw of the noise model gives."""

    samples: Samples | None  # None: the program has no noise model (a replayed module)
    overflow: list[bool] | None = None  # per output: depends on a value beyond its dtype's range


class NoiseModel:
    """The noise model, drawn at most once: a draw is a worker request that counts as an
    execution, and an assessment asks for it from invariants, every target's judgement
    and the cross-check alike."""

    def __init__(self, draw: Callable[[], NoiseDraw]) -> None:
        self._draw = draw

    @classmethod
    def of(cls, samples: Callable[[], Samples | None],
           overflow: Callable[[], list[bool] | None] | None = None) -> NoiseModel:
        """A model from the two callables oracle.judge takes, both called at the one draw."""
        return cls(lambda: NoiseDraw(samples(), overflow() if overflow is not None else None))

    @cached_property
    def drawn(self) -> NoiseDraw:
        return self._draw()

    def samples(self) -> Samples | None:
        return self.drawn.samples

    def overflow(self) -> list[bool] | None:
        return self.drawn.overflow

    def mapped(self, each: Callable[[list[np.ndarray]], list[np.ndarray]]) -> NoiseModel:
        """The same draw with `each` applied to every sample (oracle.without_undetermined):
        drawn through this model, so the request is still made once."""
        def draw() -> NoiseDraw:
            samples = self.samples()
            return NoiseDraw(None if samples is None else [each(s) for s in samples], self.overflow())
        return NoiseModel(draw)
