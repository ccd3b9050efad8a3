"""config/README.md: every key of the workflow's configuration, written from the descriptions
of its schema (``fedrepro/schemas/config.yaml``) and the values of the embedded default
(``config/config.yaml``). A test fails while the page and the schema differ; regenerate with
``python workflow/scripts/make_config_doc.py --out config/README.md``.

One section per top-level key; the keys under it as a table (type, default, description).
A block the schema defines once and uses in several places (``$defs``: a scale's settings, a
dataset's data settings, …) gets a section of its own, linked from each place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fedrepro.experiments.config import SCHEMA_DIR, load_yaml

COMMAND = "python workflow/scripts/make_config_doc.py --out config/README.md"
NAME = "<name>"  # a key of the user's choosing (a dataset, a workload) in a path
LONGEST_VALUE = 80  # characters of a default shown whole


@dataclass
class _Row:
    path: str
    type: str
    default: str
    description: str


@dataclass
class _Pages:
    """What a walk of the schema collects: each block's uses (the block that uses it, or ""
    at the top; the path), in the order first met."""

    uses: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


def _block(node: dict) -> str | None:
    ref = node.get("$ref", "")
    return ref.removeprefix("#/$defs/") if ref.startswith("#/$defs/") else None


def _code(value: object) -> str:
    return f"`{value}`"


def _flow(value: object) -> str:
    """``value`` as YAML writes it on one line (``true``, ``[a, b]``, ``{x: 1}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _cell(text: str) -> str:
    """Text for a table cell: one line, pipes escaped, angle brackets kept out of HTML."""
    text = " ".join(text.split())
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _bounds(node: dict) -> str:
    marks = [
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ]
    return ", ".join(f"{sign} {node[k]}" for k, sign in marks if k in node)


def type_text(node: dict) -> str:
    """What a key takes, in words: its type and bounds, its allowed values, a block's link."""
    if (block := _block(node)) is not None:
        return f"[`{block}` block](#block-{block})"
    if "const" in node:
        return _code(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(_code(v) for v in node["enum"])
    for combined in ("anyOf", "oneOf"):
        if combined in node:
            return " or ".join(type_text(alt) for alt in node[combined])
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    words = []
    for k in kinds:
        if k == "array":
            words.append("list of " + type_text(node.get("items", {})))
        elif k == "object" and isinstance(node.get("additionalProperties"), dict):
            words.append(f"map: {_code(NAME)} → " + type_text(node["additionalProperties"]))
        else:
            words.append(k)
    text = " or ".join(words)
    if bounds := _bounds(node):
        text += f" {bounds}"
    if must := [k for k in node.get("required", []) if k not in node.get("properties", {})]:
        text += "; names " + ", ".join(_code(k) for k in must)
    return text


def _lookup(values: dict | None, path: list[str]) -> tuple[bool, object]:
    node: object = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def default_text(node: dict, values: dict | None, path: list[str]) -> str:
    """The embedded default's value at ``path`` (``values`` is config/config.yaml; None in a
    block, whose values differ by use), else the schema's default; an object whose keys have
    rows of their own shows none."""
    if node.get("properties"):
        return ""
    found, value = _lookup(values, path) if values is not None else (False, None)
    if not found and "default" in node:
        found, value = True, node["default"]
    if not found:
        return "—"
    shown = _flow(value)
    if len(shown) <= LONGEST_VALUE:
        return _code(shown)
    if isinstance(value, dict) and _block(node) is not None:
        return "set in `config/config.yaml`"
    if isinstance(value, dict):
        return "entries " + ", ".join(_code(k) for k in value)
    return f"{len(value)} items" if isinstance(value, list) else _code(shown[:LONGEST_VALUE] + "…")


def _alternatives(node: dict) -> list[dict]:
    return [node, *node.get("anyOf", []), *node.get("oneOf", [])]


def _rows(node: dict, path: list[str], values: dict | None, pages: _Pages, where: str) -> list:
    """A row per key under ``node`` (depth first), noting each block used and where."""
    rows = []
    for alt in _alternatives(node):
        if (block := _block(alt)) is not None:
            pages.uses.setdefault(block, []).append((where, ".".join(path)))
        required = set(alt.get("required", []))
        for key, child in alt.get("properties", {}).items():
            sub = [*path, key]
            kind = type_text(child) + ("; required" if key in required else "")
            default = default_text(child, values, sub)
            rows.append(_Row(".".join(sub), kind, default, child.get("description", "")))
            rows += _rows(child, sub, values, pages, where)
        extra = alt.get("additionalProperties")
        if isinstance(extra, dict):
            rows += _rows(extra, [*path, NAME], None, pages, where)
        if isinstance(alt.get("items"), dict):
            rows += _rows(alt["items"], path, None, pages, where)
    return rows


def _table(rows: list[_Row]) -> list[str]:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {_code(r.path)} | {r.type} | {r.default} | {_cell(r.description)} |")
    return lines


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


def _section(title: str, node: dict, rows: list[_Row], facts: str) -> list[str]:
    lines = [f"## {title}", ""]
    if text := _sentence(node.get("description", "")):
        lines += [text.replace("<", "&lt;").replace(">", "&gt;"), ""]
    lines += [facts, ""]
    if rows:
        lines += [*_table(rows), ""]
    return lines


HEAD = f"""# Configuration

<!-- Generated from src/fedrepro/schemas/config.yaml by `{COMMAND}`:
     edit the schema's descriptions, not this page (tests/experiments/test_config_doc.py). -->

Every key of the workflow's configuration. Each run starts from `config/config.yaml`, the
embedded default (scale `mini`); `--configfile` files merge over it: `config/paper.yaml`
(the paper scale), `config/smoke.yaml` (the paper-shape smoke, `docs/smoke.md`) and
`config/gpu_check.yaml` (the GPU check, `docs/gpu.md`). Snakemake checks the result against
the schema, `src/fedrepro/schemas/config.yaml`, before any job; this page is written from
that schema. The experiment files (`config/experiments/<paper>.yaml`) have schemas of their
own beside it: `experiment.yaml`, `run.yaml` and `adapt.yaml`.

In the tables: **type** gives the values a key takes (*required*: it must be set);
**default** is the value in `config/config.yaml`, else the schema's default (—: none);
`{NAME}` is a key of your choosing, such as a dataset's or a workload's name. A block used
in several places has its own section below, after the top-level keys."""


def config_reference(schema: dict, values: dict) -> str:
    """The page: ``schema`` is the config schema, ``values`` the embedded default."""
    pages = _Pages()
    required = set(schema.get("required", []))
    keys = {
        key: _rows(node, [key], values, pages, "") for key, node in schema["properties"].items()
    }
    blocks: dict[str, list[_Row]] = {}
    while todo := [b for b in pages.uses if b not in blocks]:  # blocks inside blocks too
        for block in todo:
            blocks[block] = _rows(schema["$defs"][block], [], None, pages, f"`{block}` block")
    titles = [_code(k) for k in keys] + [f"Block `{b}`" for b in blocks]
    contents = " · ".join(f"[{t}](#{_anchor(t)})" for t in titles)
    lines = [HEAD, "", f"Sections: {contents}", ""]
    for key, rows in keys.items():
        node = schema["properties"][key]
        facts = f"**Type:** {type_text(node)}" + ("; required" if key in required else "")
        if default := default_text(node, values, [key]):
            facts += f" · **Default:** {default}"
        lines += _section(_code(key), node, rows, facts)
    for block, rows in blocks.items():
        node = schema["$defs"][block]
        facts = f"**Type:** {type_text(node)} · **Used by:** {_uses(pages.uses[block])}"
        lines += _section(f"Block `{block}`", node, rows, facts)
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    """The id GitHub gives a heading: lower case, spaces as hyphens, backticks dropped."""
    return title.replace("`", "").lower().replace(" ", "-")


def _uses(uses: list[tuple[str, str]]) -> str:
    """Where a block is used: top-level paths first, then per block that uses it."""
    owners: dict[str, list[str]] = {}
    for owner, path in uses:
        owners.setdefault(owner, []).append(_code(path))
    parts = [
        ", ".join(paths) + (f" in the {owner}" if owner else "") for owner, paths in owners.items()
    ]
    return "; ".join(parts)


def render(repo: Path) -> str:
    """config/README.md as the schema and ``repo``'s config/config.yaml give it."""
    schema = yaml.safe_load((SCHEMA_DIR / "config.yaml").read_text())
    return config_reference(schema, load_yaml(repo / "config" / "config.yaml"))
