"""Structure jobs: parameter and payload counts of paper-scale architectures, as JSON.

No training and no data: models are built from their configs (on the meta device where
only shapes matter) and the engine's algorithms say what is sent. Tables read the JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedrepro.atomic import write_json
from fedrepro.structure.parameters import DEFAULT_QUANTITIES, count_rows
from fedrepro.structure.payload import measure_payload


def _payload(spec: dict[str, Any]) -> list[dict]:
    return measure_payload(spec["backbone"], int(spec["num_classes"]), spec["algorithm"])


def _parameters(spec: dict[str, Any]) -> list[dict]:
    quantities = tuple(spec.get("quantities", DEFAULT_QUANTITIES))
    return count_rows(spec["configs"], spec["backbone"], int(spec["num_classes"]), quantities)


# kind -> what a structure job of that kind measures (rows of the JSON it writes)
STRUCTURES: dict[str, Callable[[dict[str, Any]], list[dict]]] = {
    "payload": _payload,
    "parameters": _parameters,
}


def measure_structure(spec: dict[str, Any], out: str | Path) -> dict[str, Any]:
    """Measure ``spec`` (``{"kind": ..., ...}``) and write ``{"spec", "columns", "rows"}`` to
    ``out`` (``columns``: the rows' keys in order, which the sorted JSON does not keep)."""
    if spec["kind"] not in STRUCTURES:
        raise ValueError(f"structure kind {spec['kind']!r} (allowed: {', '.join(STRUCTURES)})")
    rows = STRUCTURES[spec["kind"]](spec)
    result = {"spec": spec, "columns": list(rows[0]) if rows else [], "rows": rows}
    write_json(Path(out), result)
    return result
