"""Model providers as pydantic-ai 2 names them, with their clients installed by the agents
extra: openai:, anthropic:, google: (Gemini API) and google-cloud: (Vertex AI) models built
(not called: no remote model API exists here) with a credential in the environment, and
each one's missing credential an AgentSetupError that names what to set (exit 2); an
unknown provider, a name that is not provider:model and the renamed names refused; Vertex
without its project, and without a cloud identity at its first request, a credential
error, not a crash; a fallback model taking over from a failing one. The models are
FunctionModels where one must answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xla_sentinel.agents.runtime import (
    EXIT_CREDENTIAL,
    AgentSetupError,
    Budget,
    make_model,
    run_agent,
    with_fallback,
)
from xla_sentinel.cli.main import main as cli_main
from xla_sentinel.spec.campaign import AGENT_CREDENTIAL_ENV, AGENT_PROVIDERS, SpecError, parse_spec

# Every variable a provider of AGENT_PROVIDERS could take a credential or project from.
CREDENTIAL_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                   "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS")
# A model name each provider's catalogue (pydantic-ai's KnownModelName) holds today.
MODELS = {"openai": "openai:gpt-5", "openai-chat": "openai-chat:gpt-5", "anthropic": "anthropic:claude-sonnet-4-6",
          "google": "google:gemini-3.8-flash", "google-cloud": "google-cloud:gemini-3.8-flash"}


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_every_provider_the_spec_takes_is_built(no_credentials: pytest.MonkeyPatch) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.google import GoogleProvider
    from pydantic_ai.providers.google_cloud import GoogleCloudProvider

    assert set(MODELS) == set(AGENT_PROVIDERS)
    for var in AGENT_CREDENTIAL_ENV.values():
        no_credentials.setenv(var, "not-a-real-key")
    no_credentials.setenv("GOOGLE_CLOUD_PROJECT", "a-project")
    no_credentials.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    kinds = {"openai": OpenAIResponsesModel, "openai-chat": OpenAIChatModel, "anthropic": AnthropicModel,
             "google": GoogleModel, "google-cloud": GoogleModel}
    for provider, name in MODELS.items():
        model = make_model(name)
        assert model.waits == []  # retried on rate limits
        assert isinstance(model.wrapped, kinds[provider]), (name, type(model.wrapped))
        assert model.model_name == name.partition(":")[2]
    # Gemini API and Vertex AI: one model class, two clients.
    gemini, vertex = make_model(MODELS["google"]).wrapped, make_model(MODELS["google-cloud"]).wrapped
    assert isinstance(gemini.provider, GoogleProvider) and gemini.system == "google"
    assert isinstance(vertex.provider, GoogleCloudProvider) and vertex.system == "google-cloud"


@pytest.mark.parametrize("provider", sorted(AGENT_CREDENTIAL_ENV))
def test_a_missing_key_names_the_variable_and_exits_2(provider: str, no_credentials: pytest.MonkeyPatch,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = AGENT_CREDENTIAL_ENV[provider]
    with pytest.raises(AgentSetupError, match=f"--model {MODELS[provider]}: no credential: set {key}"):
        make_model(MODELS[provider])
    assert cli_main(["agent", "--role", "fix", "--model", MODELS[provider], "--out", str(tmp_path),
                     "--task", "x"]) == EXIT_CREDENTIAL
    assert f"no credential: set {key}" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "why"), [
    ("groq:llama-3.3-70b", "unknown model provider 'groq'; known: openai, openai-chat, anthropic, google, google-cloud"),
    ("gpt-5", "must be provider:model like openai:gpt-5, got 'gpt-5'"),
    ("anthropic:", "must be provider:model"),
])
def test_an_unknown_provider_or_a_bare_name_is_refused_as_the_spec_refuses_it(name: str, why: str) -> None:
    with pytest.raises(AgentSetupError, match=f"--model {name}: {why}"):
        make_model(name)
    with pytest.raises(SpecError, match=why):  # the swarm's spec says the same
        parse_spec({"agents": {"model": name, "credentialSecretRef": {"name": "k", "key": "k"},
                               "roles": [{"role": "fix"}]}})


async def test_vertex_without_a_cloud_identity_is_a_credential_error(no_credentials: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """google-cloud: builds its client without an identity; google-auth looks for one at the
    first request. None there (a credentials file that does not exist: found missing before
    any connection) ends the run as a missing credential, exit 2 with its transcript, not as
    a crash the Job would run again."""
    from pydantic_ai.toolsets import FunctionToolset

    no_credentials.setenv("GOOGLE_CLOUD_PROJECT", "a-project")
    no_credentials.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-adc.json"))
    model = make_model(MODELS["google-cloud"])
    with pytest.raises(AgentSetupError, match="cloud identity is missing or was refused.*no-such-adc.json"):
        await run_agent("stress", model, FunctionToolset([]), tmp_path, "vertex-1", Budget(seconds=60),
                        task_text="x")
    [transcript] = (tmp_path / "agents" / "transcripts").glob("stress-vertex-1-*.json")
    record = json.loads(transcript.read_text())
    assert record["exit"] == EXIT_CREDENTIAL and record["status"].startswith("credential: ")


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
                                  "roles": [{"role": "stress", "model": "google-cloud:gemini-2.5-flash"}],
                                  "vertex": {"project": "fuzz-project-1"}}})
    assert spec.agents is not None and spec.agents.model == "google:gemini-2.5-pro"
    with pytest.raises(SpecError, match="credentialSecretRef"):  # google: takes an API key
        parse_spec({"agents": {"model": "google:gemini-2.5-pro", "roles": [{"role": "fix"}]}})


def test_vertex_without_a_project_is_a_setup_error(no_credentials: pytest.MonkeyPatch) -> None:
    with pytest.raises(AgentSetupError, match="GOOGLE_CLOUD_PROJECT"):
        make_model(MODELS["google-cloud"])


async def test_a_fallback_model_takes_over_from_a_failing_one() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    asked: list[str] = []

    def down(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("primary")
        raise ModelHTTPError(500, "primary", body="internal error")

    def up(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("fallback")
        return ModelResponse(parts=[TextPart("answered by the fallback")])

    model = with_fallback(FunctionModel(down, model_name="primary"), FunctionModel(up, model_name="fallback"))
    assert (await Agent(model).run("hi")).output == "answered by the fallback"
    assert asked == ["primary", "fallback"]
    alone = FunctionModel(up)
    assert with_fallback(alone) is alone  # no fallback: the model itself
