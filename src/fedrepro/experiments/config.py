"""Loading and validating configuration: every error is one line naming the key."""

from __future__ import annotations

import copy
from functools import cache
from importlib.resources import files
from pathlib import Path

import jsonschema
import yaml

from fedrepro.experiments.items import ITEM_KINDS

# Package data (src/fedrepro/schemas/*.yaml), so a non-editable install finds them too.
SCHEMA_DIR = files("fedrepro") / "schemas"


class ConfigError(ValueError):
    """A bad configuration value; the message names the key and what is allowed."""


def load_yaml(path: Path) -> dict:
    """A YAML file; a syntax error is one line naming the file, the line and the problem."""
    with open(path) as fh:
        try:
            return yaml.safe_load(fh) or {}
        except yaml.MarkedYAMLError as err:
            mark = err.problem_mark or err.context_mark
            line = f":{mark.line + 1}" if mark else ""
            raise ConfigError(f"{path}{line}: not YAML ({err.problem or err.context})") from None


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
    doc = load_yaml(SCHEMA_DIR / f"{schema}.yaml")
    if schema == "experiment":  # item kinds come from their registry, not a second list
        item = doc["properties"]["items"]["additionalProperties"]
        item["properties"]["kind"] = {"enum": list(ITEM_KINDS)}
        from_runs = [k for k, v in ITEM_KINDS.items() if not v.structure]
        item["if"] = {"properties": {"kind": {"enum": from_runs}}}
    return jsonschema.Draft202012Validator(doc)


def validate(doc: dict, schema: str, root: str) -> None:
    """Validate against `fedrepro/schemas/<schema>.yaml`; raise ConfigError with one line."""
    validator = _validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), e.path))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise ConfigError(_where(best, root))
