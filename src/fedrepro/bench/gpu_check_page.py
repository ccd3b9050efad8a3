"""The GPU check's page (``results/<scale>/gpu_check.md``), its table of measured step times
(``gpu_check/step_times.csv``: what the cost model reads) and its summary
(``gpu_check/summary.json``: ``passed`` and each check's verdict). No torch: the records are
the check's jobs' (``fedrepro.bench.gpu_check``) and the discipline reports the smoke's jobs
wrote (``fedrepro.discipline``)."""

from __future__ import annotations

import csv
import json
import platform
from datetime import UTC, datetime
from pathlib import Path

from fedrepro.atomic import write_json
from fedrepro.discipline import STEP_PHASES, unexplained_waits

__all__ = ["STEP_COLUMNS", "write_page", "write_steps"]

STEP_COLUMNS = [
    "run",
    "algorithm",
    "backbones",
    "tuning",
    "img_size",
    "batch",
    "clients",
    "device",
    "device_name",
    "step_ms",
    "steps_timed",
    "peak_mb",
    "estimate_mb",
]


def _load(paths) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


def discipline(reports: Path, jobs: dict) -> dict:
    """Every job's discipline report against what it may wait for: how many were checked,
    those missing, and each job's unexplained findings (``unexplained_waits``)."""
    expected = {**{r: (j["run"], None) for r, j in jobs["runs"].items()},
                **{a: (j["run"], j["adapt"]) for a, j in jobs["adapts"].items()}}  # fmt: skip
    found, missing, cuda = {}, [], 0
    for name, (run, adapt) in sorted(expected.items()):
        path = Path(reports) / f"{name}.json"
        if not path.exists():
            missing.append(name)
            continue
        report = json.loads(path.read_text())
        cuda += sum(sum(v.values()) for v in report.get("cuda_syncs", {}).values())
        if problems := unexplained_waits(report, run, adapt):
            found[name] = problems
    return {"checked": len(expected) - len(missing), "missing": missing, "problems": found,
            "cuda_syncs": cuda, "passed": not missing and not found}  # fmt: skip


def _step_rows(steps: list[dict], jobs: dict) -> list[dict]:
    rows = []
    for s in steps:
        model = jobs["runs"][s["run"]]["run"]["model"]
        algorithm = jobs["runs"][s["run"]]["run"]["algorithm"]["name"]
        backbones = "+".join(dict.fromkeys(model.get("client_backbones") or [model["backbone"]]))
        rows.append(
            {
                **s,
                "algorithm": algorithm,
                "backbones": backbones,
                "tuning": model.get("tuning", "full"),
                "img_size": model.get("img_size"),
            }
        )
    return sorted(rows, key=lambda r: -r["step_ms"])


def write_steps(path: str, steps, jobs: dict) -> int:
    """The step-time table alone (``snakemake calibrate``: the cost model's measured steps,
    ``fedrepro.cost.work.measured_steps``) from the step jobs' records; its row count."""
    rows = _step_rows(_load(steps), jobs)
    _write_rows(path, rows)
    return len(rows)


def _write_rows(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, STEP_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_page(out: dict, root: str, repeats, resumes, steps, jobs: dict, settings: dict) -> bool:
    """Write the page, the step-time table and the summary (``out``: ``page``, ``steps``,
    ``summary`` paths); True when every check passed."""
    reps, res = _load(repeats), _load(resumes)
    disc = discipline(Path(root) / "discipline", jobs)
    rows = _step_rows(_load(steps), jobs)
    differing = [(r["stage"], m) for r in reps for m in r["members"] if m["differ"] or m["missing"]]
    verdicts = {
        "discipline": disc["passed"],
        "repeat": all(r["identical"] for r in reps),
        "resume": all(r["identical"] for r in res),
    }
    passed = all(verdicts.values())
    device = rows[0]["device_name"] if rows else "?"
    _write_rows(out["steps"], rows)
    write_json(out["summary"], {"passed": passed, **verdicts, "device": device,
                                "discipline": disc, "settings": settings})  # fmt: skip
    members = sum(len(r["members"]) for r in reps)
    lines = [
        f"# GPU check: {'PASSED' if passed else 'FAILED'}",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {device} ({platform.node()}); the "
        "paper-shape smoke's jobs (their numbers mean nothing: paper smoke) with the settings "
        f"`{json.dumps(settings, sort_keys=True)}`. How to run it and read it: docs/gpu.md.",
        "",
        "| check | result |",
        "|---|---|",
        f"| discipline (every training and adaptation job) | {disc['checked']} reports, "
        f"{len(disc['missing'])} missing, {len(disc['problems'])} with unexplained findings, "
        f"{disc['cuda_syncs']} CUDA syncs in {'/'.join(STEP_PHASES)} phases |",
        f"| run twice, compared file by file (timings aside) | {len(reps)} jobs, {members} "
        f"runs, {len(differing)} differing |",
    ]
    for r in res:
        lines.append(
            f"| killed after round 1's checkpoint, resumed ({r['run']}, {r['rounds']} rounds) | "
            f"{'killed' if r['killed_after_checkpoint'] else 'finished before the kill'}, "
            f"{r['files']} files, differ {r['differ'] or 'none'} |"
        )
    for name, problems in disc["problems"].items():
        lines.append(f"\n- `{name}`: " + "; ".join(problems))
    for stage, m in differing:
        lines.append(f"\n- {stage} `{m['member']}`: differ {m['differ']}, missing {m['missing']}")
    lines += [
        "",
        "## Step time at the paper's batch, peak device memory against the estimate",
        "",
        "Peak: `torch.cuda.max_memory_allocated` over the timed job (none on a CPU); "
        "estimate: the meta-device count of the step, the algorithm's state and the "
        "job's data (`fedrepro.cost.job_memory`). Table: "
        f"`{out['steps']}`.",
        "",
        "| run family | batch | step (ms) | peak (MB) | estimate (MB) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        peak = "–" if r["peak_mb"] is None else f"{r['peak_mb']:,.0f}"
        lines.append(
            f"| {r['algorithm']} {r['backbones']} {r['tuning']} {r['img_size']} px | "
            f"{r['batch']} | {r['step_ms']:.2f} | {peak} | {r['estimate_mb']:,.0f} |"
        )
    Path(out["page"]).write_text("\n".join(lines) + "\n")
    return passed
