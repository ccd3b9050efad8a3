"""The embedded default's time per paper on this machine (``snakemake bench``, mini scale).

From the jobs' own records: every job of the default writes a Snakemake benchmark file
(``results/<scale>/benchmarks/<rule>/<name>.tsv``: the job's wall seconds); a training or
adaptation job also writes its record (its members, its in-process seconds) and each member
its metrics (``seconds``: set-up, training, evaluation, writing). A job's paper is its runs' paper
(training; an adaptation: its trained run's), or its item's (tables, figures, claims); data,
partitions, backbones and probes are shared. The benchmark jobs of ``snakemake bench`` (part
of the default at mini scale) are a row of their own, from their benchmark files under
``results/bench/benchmarks``. The timed run is the Snakemake process that runs this job: its
wall time since it started and its own CPU time (``bench.driver``).

Per paper, the estimated wall time is its job seconds over the cores, scaled so that all
papers, the shared work and the benchmarks add up to the timed run's wall time. A timed run
that did not run every job (a job's benchmark file is older than the run's start: it came
from an earlier run, e.g. after an edit that reruns only the tables) does not time the
default: the wall time is then the job seconds over the cores, said to be an estimate.
"""

from __future__ import annotations

import csv
import html
import json
import os
from collections import defaultdict
from pathlib import Path

import pandas as pd

from fedrepro.bench import learning as learned
from fedrepro.bench.summary import md_table
from fedrepro.report.output import write_text

SHARED = "shared"
BENCH = "bench"  # the benchmark jobs: a row of their own, without a limit
STAGE_DIRS = {"train": "runs", "adapt": "adapt"}  # where a job of the stage writes


def _timing(tsv: Path) -> dict[str, float]:
    """A job's benchmark file: its wall seconds, and when it finished (the file's time)."""
    with open(tsv) as f:
        seconds = float(next(csv.DictReader(f, delimiter="\t"))["s"])
    return {"seconds": seconds, "finished": tsv.stat().st_mtime}


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _run_shares(metrics: dict) -> dict[str, float]:
    """A run's in-process seconds: set-up (data, model, writing results), training, evaluation."""
    s = metrics.get("seconds", {})
    return {"set-up": s.get("setup", 0.0) + s.get("write", 0.0),
            "training": s.get("train", 0.0), "evaluation": s.get("evaluate", 0.0)}  # fmt: skip


def job_table(root: Path) -> list[dict]:
    """One row per benchmarked job: rule, name, paper, wall seconds and, for training and
    adaptation jobs, the in-process seconds by share (process start = the rest)."""
    rows = []
    for tsv in sorted(Path(root, "benchmarks").rglob("*.tsv")):
        rule = tsv.relative_to(Path(root, "benchmarks")).parts[0]
        name = tsv.stem
        row = {"rule": rule, "name": name, "paper": SHARED, **_timing(tsv)}
        wall = row["seconds"]
        if rule in STAGE_DIRS:  # the job's record names its members' directories
            stage = STAGE_DIRS[rule]
            record = _json(Path(root, stage, f"{name}.json"))
            members = [Path(root, stage, r["run"]) for r in record.get("runs", [])]
            configs = [_json(m / "config.json") for m in members]
            if rule == "adapt":  # an adaptation's paper is its trained run's
                configs = [_json(Path(root, "runs", str(c.get("run")), "config.json"))
                           for c in configs]  # fmt: skip
            row["paper"] = next((c["paper"] for c in configs if "paper" in c), SHARED)
            if rule == "train":
                row["runs"] = len(members)
            _add_shares(row, [_json(m / "metrics.json") for m in members], wall)
        elif rule == "items":  # benchmarks/items/<paper>/<item>.tsv
            row["paper"] = tsv.parent.name
        elif rule == "claims":  # benchmarks/claims/<paper>.tsv
            row["paper"] = name
        rows.append(row)
    return rows


def bench_table(bench: str | Path | None) -> list[dict]:
    """One row per benchmark job (``snakemake bench``'s rules), from its benchmark file under
    ``bench``; none without the directory."""
    if bench is None:
        return []
    return [{"rule": BENCH, "name": tsv.stem, "paper": BENCH, **_timing(tsv)}
            for tsv in sorted(Path(bench).rglob("*.tsv"))]  # fmt: skip


def _add_shares(row: dict, metrics: list[dict], wall: float) -> None:
    inside = 0.0
    for m in metrics:
        for k, v in _run_shares(m).items():
            row[k] = row.get(k, 0.0) + v
        inside += m.get("wall_seconds", 0.0)
    row["process start"] = max(wall - inside, 0.0)


SHARES = ("process start", "set-up", "training", "evaluation")


def budget(
    root: Path,
    cores: int | None,
    limits: dict,
    timed: dict | None,
    bench: str | Path | None = None,
    docs: str | Path | None = None,
) -> dict:
    """Per paper (and the shared work, and the benchmark jobs whose files are under
    ``bench``): jobs, runs, job seconds by kind and share, the estimated wall minutes on
    ``cores`` (a local run's; None: a cluster run's, this machine's cores) and whether it is
    within ``limits`` (``{"paper_minutes", "total_minutes"}``); the timed run's wall and
    Snakemake CPU; whether each paper learns (``bench.learning``, its failing claims checked
    against the method notes in ``docs``)."""
    cores = cores or os.cpu_count() or 1
    rows = job_table(root) + bench_table(bench)
    papers: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        p = papers[r["paper"]]
        p["jobs"] += 1
        p["runs"] += r.get("runs", 0)
        p["seconds"] += r["seconds"]
        kind = r["rule"] if r["rule"] in ("train", "adapt") else "other jobs"
        p[f"{kind} seconds"] += r["seconds"]
        for share in SHARES:
            p[share] += r.get(share, 0.0)
    job_seconds = sum(p["seconds"] for p in papers.values())
    ideal = job_seconds / max(cores, 1)
    earlier = _earlier_jobs(rows, timed)
    wall = timed["wall_seconds"] if timed and not earlier else ideal
    scale = wall / ideal if ideal else 1.0
    out = {"cores": cores, "limits": limits, "timed": timed, "job_seconds": job_seconds,
           "wall_seconds": wall, "jobs": len(rows), "earlier_jobs": earlier,
           "papers": {}}  # fmt: skip
    for name, p in sorted(papers.items()):
        minutes = p["seconds"] / max(cores, 1) * scale / 60
        within = None if name in (SHARED, BENCH) else minutes <= limits["paper_minutes"]
        out["papers"][name] = {**p, "minutes": minutes, "within": within}
        if within is not None:  # a paper's: does it learn (bench.learning)
            out["papers"][name]["learning"] = learned.paper_learning(root, name, docs)
    out["minutes"] = wall / 60
    out["within"] = out["minutes"] <= limits["total_minutes"]
    if timed and timed.get("cpu_seconds") is not None:
        out["snakemake_share"] = timed["cpu_seconds"] / (timed["wall_seconds"] * max(cores, 1))
    return out


def _earlier_jobs(rows: list[dict], timed: dict | None) -> int:
    """How many jobs finished before the timed run started (their records are from an earlier
    run); 0 without a timed run or its start."""
    started = (timed or {}).get("started")
    if started is None:
        return 0
    return sum(r["finished"] < float(started) for r in rows)


LEARNING_TEXT = (
    "Whether it learns (mini scale, not the papers' numbers): of a paper's accuracy cells, "
    "those at least twice chance (chance: 100 % over the classes); of the cells the paper "
    "reports at three times chance or more, those at least twice chance on ours; the claims "
    "that hold on ours, and of those that hold on the paper's own numbers, the ones that hold "
    "on ours too (the reasons of the others: docs/methods/<paper>.md), and how many of the "
    "others those notes never name."
)
BELOW_TITLE = "Cells the paper reports at three times chance or more, below twice chance here"
NO_REASON_TITLE = (
    "Claims that hold on the paper's numbers and fail here, not named in docs/methods/<paper>.md"
)


def _learning_columns(learning: dict | None) -> dict[str, str]:
    if learning is None:
        return dict.fromkeys(LEARNING_COLUMNS, "")
    values = (
        learned.share(learning["cells_twice_chance"], learning["cells"]),
        learned.share(learning["reported_thrice_ours_twice"], learning["reported_thrice"]),
        learned.share(learning["claims_hold"], learning["claims"]),
        learned.share(learning["paper_claims_hold"], learning["paper_claims"]),
        "" if learning.get("no_reason") is None else str(len(learning["no_reason"])),
    )
    return dict(zip(LEARNING_COLUMNS, values, strict=True))


LEARNING_COLUMNS = (
    "cells ≥ 2× chance",
    "paper ≥ 3× chance: ours ≥ 2×",
    "claims hold",
    "paper's holding claims: ours",
    "of the others, without a reason",
)


def _below_frame(papers: dict) -> pd.DataFrame:
    below = [(n, b) for n, p in papers.items() for b in p.get("learning", {}).get("below", [])]
    rows = [{"paper": name, "item": b["item"], "cell": b["cell"], "ours %": f"{b['mean']:.1f}",
             "chance %": f"{b['chance']:.1f}", "paper %": f"{b['paper_value']:.1f}"}
            for name, b in below]  # fmt: skip
    return pd.DataFrame(rows)


def _no_reason_frame(papers: dict) -> pd.DataFrame:
    rows = [{"paper": name, "claim": claim} for name, p in papers.items()
            for claim in p.get("learning", {}).get("no_reason") or []]  # fmt: skip
    return pd.DataFrame(rows)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def write_budget(out: Path, result: dict) -> list[Path]:
    """``budget.md`` and ``budget.html``: a row per paper (and the shared work), where each
    stands against its limit, and the whole run against its own."""
    limits, cores = result["limits"], result["cores"]
    rows = []
    for name, p in result["papers"].items():
        verdict = "" if p["within"] is None else ("meets" if p["within"] else "misses")
        limit = "" if p["within"] is None else f" ({verdict} ≤ {limits['paper_minutes']})"
        split = " / ".join(_minutes(p.get(s, 0.0)) for s in SHARES)
        rows.append({"paper": name, "jobs": int(p["jobs"]), "runs": int(p["runs"]),
                     "train / adapt / other job min": " / ".join(
                         _minutes(p.get(f"{k} seconds", 0.0))
                         for k in ("train", "adapt", "other jobs")),
                     "start / set-up / training / evaluation min": split,
                     f"wall min on {cores} cores": f"{p['minutes']:.1f}{limit}",
                     **_learning_columns(p.get("learning"))})  # fmt: skip
    frame = pd.DataFrame(rows)
    timed = result.get("timed")
    verdict = "meets" if result["within"] else "misses"
    total = limits["total_minutes"]
    whole = f"The run: {result['minutes']:.1f} min of wall time ({verdict} ≤ {total} min)"
    earlier = result.get("earlier_jobs", 0)
    if timed is None:
        whole += ", estimated as job seconds over the cores (no timed run: not run by Snakemake)"
    elif earlier:
        whole += (f", estimated as job seconds over the cores: the timed Snakemake run "
                  f"({timed['wall_seconds'] / 60:.1f} min) ran {result['jobs'] - earlier} of "
                  f"the {result['jobs']} jobs, the other {earlier} are records of earlier runs; "
                  f"time the default from an empty `results/`")  # fmt: skip
    elif "snakemake_share" in result:
        whole += (f"; the Snakemake process used {timed['cpu_seconds'] / 60:.1f} CPU min, "
                  f"{result['snakemake_share']:.1%} of the {cores} cores")  # fmt: skip
    text = (
        "The embedded default's time per paper on this machine, from the jobs' own records "
        "(Snakemake benchmark files, training records, each run's metrics.json `seconds`). "
        "Job minutes by kind; in training and adaptation jobs, the minutes of process start "
        "(the job's wall time outside the Python job), set-up (data, model, writing results), "
        "training rounds and evaluation. A paper's wall time is its share of the timed run "
        "(its job seconds over the cores, scaled so that every row adds up to the run). "
        "Shared: data, partitions, pretrained backbones, probes; bench: the benchmark jobs."
    )
    below = _below_frame(result["papers"])
    md = [
        "# Time budget of the embedded default",
        "",
        text,
        "",
        whole + ".",
        "",
        md_table(frame),
        "",
        LEARNING_TEXT,
        "",
    ]
    page = ["<h1>Time budget of the embedded default</h1>", f"<p>{html.escape(text)}</p>",
            f"<p>{html.escape(whole)}.</p>", frame.to_html(index=False, border=0),
            f"<p>{html.escape(LEARNING_TEXT)}</p>"]  # fmt: skip
    no_reason = _no_reason_frame(result["papers"])
    for title, listed in ((BELOW_TITLE, below), (NO_REASON_TITLE, no_reason)):
        if not listed.empty:
            md += [title, "", md_table(listed), ""]
            page += [f"<h2>{html.escape(title)}</h2>", listed.to_html(index=False, border=0)]
    out = Path(out)
    return [
        write_text(out.with_suffix(".md"), "\n".join(md)),
        write_text(out.with_suffix(".html"), "\n".join(page)),
    ]
