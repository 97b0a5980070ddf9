"""Validate custom resources offline the way the API server does: defaults, structural
schema (jsonschema on the CRD's openAPIV3Schema), unknown fields, and CEL rules
(`x-kubernetes-validations`, evaluated with cel-python).

Used by the tests' API emulator (admission) and by chart tests on rendered manifests.
Transition rules (those that read `oldSelf`) need the previous object and are skipped.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@functools.lru_cache(maxsize=16)
def _load(crd_dir: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, kind) -> openAPIV3Schema for every served CRD version in crd_dir."""
    schemas: dict[tuple[str, str, str], dict[str, Any]] = {}
    files = sorted(Path(crd_dir).glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"{crd_dir}: no CRD *.yaml files")
    for path in files:
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: malformed CRD YAML: {e}") from None
        for doc in docs:
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    key = (spec["group"], version["name"], spec["names"]["kind"])
                    schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def schema_for(api_version: str, kind: str, crd_dir: str | Path) -> dict[str, Any] | None:
    """The openAPIV3Schema serving `kind` at `api_version`, or None when no CRD defines it."""
    group, _, version = api_version.rpartition("/")
    return _load(str(Path(crd_dir).resolve())).get((group, version, kind))


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Return `value` with the schema's defaults filled in, as the API server stores it."""
    if isinstance(value, dict):
        out = dict(value)
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(sub, out[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in out:
                if key not in props:
                    out[key] = apply_defaults(extra, out[key])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def defaulted(obj: dict[str, Any], crd_dir: str | Path) -> dict[str, Any]:
    """`obj` with its CRD's defaults applied; unchanged when no CRD in crd_dir defines it."""
    schema = schema_for(obj.get("apiVersion", ""), obj.get("kind", ""), crd_dir)
    return obj if schema is None else apply_defaults(schema, obj)


def validate(obj: dict[str, Any], crd_dir: str | Path) -> list[str]:
    """All the reasons the API server would reject `obj`, one line each ("path: message").

    An empty list means valid. Defaults are applied first, as the server does.
    """
    if not isinstance(obj, dict):
        return ["<root>: expected a mapping"]
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    schema = schema_for(api_version, kind, crd_dir)
    if schema is None:
        return [f"kind: no CRD in {crd_dir} serves {kind!r} at {api_version!r}"]
    errors = _metadata_errors(obj.get("metadata"))
    full = apply_defaults(schema, obj)
    errors += _unknown_fields(schema, full, "")
    for err in sorted(_validator(schema).iter_errors(full), key=lambda e: list(e.absolute_path)):
        errors.append(f"{_path(err.absolute_path) or '<root>'}: {err.message}")
    if not errors:  # CEL rules assume a structurally valid object, as in the API server
        errors += list(_cel_errors(schema, full, ""))
    return errors


def _metadata_errors(meta: Any) -> list[str]:
    if not isinstance(meta, dict) or not meta.get("name"):
        return ["metadata.name: required"]
    name = meta["name"]
    if not isinstance(name, str) or len(name) > 253 or not _NAME.match(name):
        return [f"metadata.name: {name!r} must be a lowercase RFC 1123 subdomain"]
    return []


_VALIDATORS: dict[int, tuple[dict[str, Any], jsonschema.Draft4Validator]] = {}


def _validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    # OpenAPI v3 schemas in CRDs use draft-4 style keywords (boolean exclusiveMinimum).
    # Keyed by identity: the loaded schemas are cached and the entry keeps its schema alive.
    hit = _VALIDATORS.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = (schema, jsonschema.Draft4Validator(schema))
        _VALIDATORS[id(schema)] = hit
    return hit[1]


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _unknown_fields(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    """Fields a structural schema does not declare (the server prunes them; strict clients
    such as `kubectl apply` reject them), reported instead of silently dropped."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    errors: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if props is not None and key in props:
                errors += _unknown_fields(props[key], sub, _join(path, key))
            elif isinstance(extra, dict):
                errors += _unknown_fields(extra, sub, _join(path, key))
            elif path == "" and key in ("apiVersion", "kind", "metadata"):
                continue  # every object has these, declared or not
            elif props is not None and path != "metadata":
                errors.append(f"{_join(path, key)}: unknown field; known fields: "
                              f"{', '.join(sorted(props))}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            errors += _unknown_fields(schema["items"], sub, _join(path, i))
    return errors


@functools.lru_cache(maxsize=256)
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _cel_errors(schema: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    for item in schema.get("x-kubernetes-validations") or []:
        rule = item["rule"]
        if "oldSelf" in rule:
            continue
        message = item.get("message") or f"failed rule: {rule}"
        try:
            ok = _program(rule).evaluate({"self": celpy.json_to_cel(value)})
        except Exception as e:  # a rule that cannot evaluate is a rejection, as in the server
            yield f"{path or '<root>'}: {message} (rule cannot evaluate: {type(e).__name__})"
            continue
        if isinstance(ok, Exception) or not bool(ok):
            yield f"{path or '<root>'}: {message}"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            sub_schema = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub_schema:
                yield from _cel_errors(sub_schema, sub, _join(path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            yield from _cel_errors(schema["items"], sub, _join(path, i))
