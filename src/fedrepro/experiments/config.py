"""Loading and validating configuration: every error is one line naming the key."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import jsonschema
import yaml

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "config" / "schema"


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and what is allowed."""


def load_yaml(path: Path) -> dict:
    with open(path) as fh:
        return yaml.safe_load(fh) or {}


def deep_merge(base: dict, over: dict) -> dict:
    """A new dict: `over` merged into `base` recursively (lists are replaced)."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _where(err: jsonschema.ValidationError, root: str) -> str:
    parts = [root, *(str(p) for p in err.absolute_path)]
    if err.validator == "additionalProperties":
        known = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(known))
        return f"{'.'.join([*parts, *extra])}: unknown key (allowed: {', '.join(known)})"
    if err.validator == "enum":
        allowed = ", ".join(map(str, err.validator_value))
        return f"{'.'.join(parts)}: {err.instance!r} is not allowed (allowed: {allowed})"
    if err.validator == "required":
        return f"{'.'.join(parts)}: {err.message}"
    return f"{'.'.join(parts)}: {err.message}"


@cache
def _validator(schema: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_yaml(SCHEMA_DIR / f"{schema}.yaml"))


def validate(doc: dict, schema: str, root: str) -> None:
    """Validate against `config/schema/<schema>.yaml`; raise ConfigError with one line."""
    validator = _validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), e.path))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise ConfigError(_where(best, root))
