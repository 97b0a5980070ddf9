"""Model providers as pydantic-ai 2 names them: the renamed ones refused with the new name,
Vertex without its project refused, a fallback model taking over from a failing one. The
models are FunctionModels where one must answer (no remote model API exists here)."""

from __future__ import annotations

import pytest
from xla_sentinel.agents.runtime import AgentSetupError, make_model, with_fallback
from xla_sentinel.spec.campaign import SpecError, parse_spec


@pytest.mark.parametrize(("old", "new"), [("google-gla:gemini-2.5-pro", "google:gemini-2.5-pro"),
                                          ("google-vertex:gemini-2.5-pro", "google-cloud:gemini-2.5-pro")])
def test_renamed_providers_are_refused_with_the_new_name(old: str, new: str) -> None:
    with pytest.raises(AgentSetupError, match=f"renamed in pydantic-ai 2: use {new}"):
        make_model(old)
    with pytest.raises(SpecError, match=f"renamed in pydantic-ai 2: use {new}"):
        parse_spec({"agents": {"model": old, "credentialSecretRef": {"name": "k", "key": "k"},
                               "roles": [{"role": "fix"}]}})


def test_the_new_names_are_the_spec_s() -> None:
    spec = parse_spec({"agents": {"model": "google:gemini-2.5-pro", "credentialSecretRef": {"name": "k", "key": "k"},
                                  "roles": [{"role": "stress", "model": "google-cloud:gemini-2.5-flash"}]}})
    assert spec.agents is not None and spec.agents.model == "google:gemini-2.5-pro"
    with pytest.raises(SpecError, match="credentialSecretRef"):  # google: takes an API key
        parse_spec({"agents": {"model": "google:gemini-2.5-pro", "roles": [{"role": "fix"}]}})


def test_vertex_without_a_project_is_a_setup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with pytest.raises(AgentSetupError, match="GOOGLE_CLOUD_PROJECT"):
        make_model("google-cloud:gemini-2.5-pro")


async def test_a_fallback_model_takes_over_from_a_failing_one() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    asked: list[str] = []

    def down(messages: list, info: object) -> ModelResponse:
        asked.append("primary")
        raise ModelHTTPError(500, "primary", body="internal error")

    def up(messages: list, info: object) -> ModelResponse:
        asked.append("fallback")
        return ModelResponse(parts=[TextPart("answered by the fallback")])

    model = with_fallback(FunctionModel(down, model_name="primary"), FunctionModel(up, model_name="fallback"))
    assert (await Agent(model).run("hi")).output == "answered by the fallback"
    assert asked == ["primary", "fallback"]
    alone = FunctionModel(up)
    assert with_fallback(alone) is alone  # no fallback: the model itself
