"""What agents spend: tokens as the model reports them, and money priced by genai-prices
(the price data pydantic-ai ships, read offline from the package's own snapshot; no price
is fetched). A response of a model genai-prices does not know (a self-hosted one, a test's
scripted endpoint) spends its tokens and no money: its tokens are counted `unpriced`, so a
money budget cannot be mistaken for covering it.

A task's spending travels with the task (`tasks.TaskQueue` and `kube_tasks.KubeTaskQueue`
add each attempt's), so the campaign's spending is the sum over its tasks, readable by every
agent pod and by the operator (status.agents.spending, the agents_spent metrics).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spend:
    """Tokens spent, dollars of those priced, and tokens of responses nobody could price."""

    tokens: int = 0
    usd: float = 0.0
    unpriced_tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.usd + other.usd,
                     self.unpriced_tokens + other.unpriced_tokens)

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "usd": round(self.usd, 6), "unpricedTokens": self.unpriced_tokens}

    @classmethod
    def from_json(cls, data: object) -> Spend:
        """A Spend from to_json(); anything else (absent, garbled) spent nothing."""
        if not isinstance(data, Mapping):
            return cls()
        try:
            tokens, usd = int(data.get("tokens") or 0), float(data.get("usd") or 0.0)
            unpriced = int(data.get("unpricedTokens") or 0)
        except (TypeError, ValueError):
            return cls()
        if tokens < 0 or unpriced < 0 or not math.isfinite(usd) or usd < 0:
            return cls()
        return cls(tokens, usd, unpriced)


def total(spends: Iterable[Spend]) -> Spend:
    out = Spend()
    for s in spends:
        out += s
    return out


def response_spend(response: Any) -> Spend:
    """One model response's spending (a pydantic_ai.messages.ModelResponse)."""
    usage = response.usage
    tokens = int(usage.input_tokens or 0) + int(usage.output_tokens or 0)
    if not tokens:
        return Spend()
    try:
        price = response.cost()  # genai-prices, from its bundled snapshot
    except (LookupError, ValueError, AssertionError):
        return Spend(tokens, 0.0, tokens)
    return Spend(tokens, float(price.total_price), 0)


def messages_spend(messages: Iterable[Any]) -> Spend:
    """The spending of a run's messages: the sum over its model responses."""
    from pydantic_ai.messages import ModelResponse

    return total(response_spend(m) for m in messages if isinstance(m, ModelResponse))


@dataclass(frozen=True)
class Budget:
    """A campaign-wide budget (spec.agents.spending; None: no limit of that kind)."""

    tokens: int | None = None
    usd: float | None = None

    def left(self, spent: Spend) -> dict[str, Any]:
        """What is left of each limit set (never below zero)."""
        out: dict[str, Any] = {}
        if self.tokens is not None:
            out["tokens"] = max(0, self.tokens - spent.tokens)
        if self.usd is not None:
            out["usd"] = round(max(0.0, self.usd - spent.usd), 6)
        return out

    def exhausted(self, spent: Spend) -> str | None:
        """Why no more may be spent, or None."""
        if self.tokens is not None and spent.tokens >= self.tokens:
            return f"campaign budget spent: {spent.tokens} of {self.tokens} tokens"
        if self.usd is not None and spent.usd >= self.usd:
            return f"campaign budget spent: ${spent.usd:.4f} of ${self.usd:.4f}"
        return None

    def tokens_left(self, spent: Spend) -> int | None:
        return None if self.tokens is None else max(0, self.tokens - spent.tokens)
