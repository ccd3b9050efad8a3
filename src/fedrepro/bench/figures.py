"""Benchmark figures: where round time goes, scaling with clients and rounds, DAG planning
time, and the paper-scale cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from fedrepro.fl.timing import PHASES
from fedrepro.report.output import save_figure

_COLOURS = dict(zip([*PHASES, "other"], ["#4878d0", "#ee854a", "#dc7ec0", "#6acc64",
                                         "#d65f5f", "#956cb4", "#8c8c8c"],
                    strict=True))  # fmt: skip


def _machine(results: list[dict]) -> str:
    m = next((r["machine"] for r in results if "machine" in r), {})
    where = m.get("gpu") or m.get("cpu", "?")
    return f"{where}, {m.get('torch_threads', '?')} torch threads, torch {m.get('torch', '?')}"


def engine_figure(results: dict[str, dict]) -> Figure:
    """Stacked phase shares of round time per workload, labelled with rate, MFU and memory."""
    ran = {k: r for k, r in results.items() if "skipped" not in r}
    fig = Figure(figsize=(8, 0.9 + 0.8 * max(1, len(ran))), layout="constrained")
    ax = fig.subplots()
    for i, r in enumerate(ran.values()):
        left = 0.0
        for phase, share in r["phase_shares"].items():
            ax.barh(i, share, left=left, color=_COLOURS[phase], label=phase if i == 0 else None)
            left += share
        ax.text(1.01, i, f"{r['samples_per_s']:,.0f} samples/s · MFU {r['mfu']:.1%} · "
                f"{r['peak_rss_mb']:,.0f} MB", va="center", fontsize=8)  # fmt: skip
    ax.axvline(0.9, color="black", ls=":", lw=1)
    ax.set_yticks(range(len(ran)), list(ran))
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of round time (dotted: 90 % = the ≤ 10 % overhead goal)")
    ax.legend(ncols=6, fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.0))
    ax.set_title(f"Engine: where a FedAvg round goes ({_machine(list(ran.values()))})",
                 fontsize=9, pad=22)  # fmt: skip
    return fig


def clients_figure(rows: list[dict]) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    k = [r["clients"] for r in rows]
    ax.plot(k, [r["round_seconds"] for r in rows], "o-", label="round time")
    ax.set_xscale("log")
    ax.set_xticks(k, [str(v) for v in k])
    ax.set_xlabel("clients (same total data)")
    ax.set_ylabel("seconds per round")
    ax.set_ylim(bottom=0)
    twin = ax.twinx()
    twin.plot(k, [100 * r["overhead_share"] for r in rows], "s--", color="tab:orange")
    twin.set_ylabel("outside fwd/bwd/optimizer (%)", color="tab:orange")
    twin.set_ylim(0, 100)
    ax.set_title("Round time as clients grow", fontsize=9)
    return fig


def rounds_figure(history: list[dict]) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    r = [h["round"] for h in history]
    ax.plot(r, [h["seconds"] for h in history], "o-", ms=3, label="seconds per round")
    ax.set_xlabel("round")
    ax.set_ylabel("seconds per round")
    ax.set_ylim(bottom=0)
    twin = ax.twinx()
    twin.plot(r, [h["rss_mb"] for h in history], "--", color="tab:green")
    twin.set_ylabel("resident memory (MB)", color="tab:green")
    twin.set_ylim(bottom=0)
    ax.set_title("Round time and memory as rounds grow (flat = no per-round growth)", fontsize=9)
    return fig


def dag_figure(rows: list[dict]) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    rows = sorted(rows, key=lambda r: r["jobs"])
    ax.plot([r["jobs"] for r in rows], [r["seconds"] for r in rows], "o-")
    for r in rows:
        ax.annotate(r["target"], (r["jobs"], r["seconds"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")  # fmt: skip
    ax.set_xlabel("jobs in the paper-scale DAG")
    ax.set_ylabel("snakemake -n seconds")
    ax.set_ylim(bottom=0)
    ax.set_title("Planning time of the paper-scale DAG", fontsize=9)
    return fig


def cost_figure(est: dict) -> Figure:
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.subplots()
    papers = list(est["papers"])
    labels = sorted({m for p in est["papers"].values() for m in p["by_model"]})
    bottom = np.zeros(len(papers))
    for label in labels:
        h = np.array([est["papers"][p]["by_model"].get(label, 0.0) for p in papers])
        ax.bar(papers, h, bottom=bottom, label=label)
        bottom += h
    ax.axhline(est["goal_gpu_hours"], color="black", ls=":", lw=1)
    ax.text(-0.4, est["goal_gpu_hours"], "goal for all five papers", va="bottom", fontsize=8)
    ax.set_ylabel("GPU-hours")
    ax.legend(fontsize=6)
    ax.set_title(f"Paper-scale cost on {est['device']}: {est['total_gpu_hours']:,.0f} h "
                 f"({est['throughput']})", fontsize=8)  # fmt: skip
    return fig


def save_all(results: dict, out_dir: Path) -> None:
    """Every benchmark figure as ``<out_dir>/<name>.{png,pdf}`` (names as in the workflow)."""
    save_figure(engine_figure(results["engine"]), out_dir / "engine")
    save_figure(clients_figure(results["clients"]), out_dir / "clients")
    save_figure(rounds_figure(results["rounds"]["history"]), out_dir / "rounds")
    save_figure(dag_figure(results["dag"]), out_dir / "dag")
    save_figure(cost_figure(results["cost"]), out_dir / "cost")
