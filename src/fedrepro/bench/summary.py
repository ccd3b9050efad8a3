"""The benchmark results as one page (Markdown and HTML), goals checked beside each number."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from fedrepro.report.output import write_text

ENGINE_TEXT = (
    "MFU = model FLOP/s over the whole round (training steps + evaluation forwards, counted "
    "by torch.utils.flop_counter) ÷ the dense matmul FLOP/s measured in the same job. "
    "'outside steps' is the share of round time not spent in forward/backward/optimizer "
    "steps (data, evaluation, aggregation, checkpoints, other), split in % of round time."
)
MEMORY_TEXT = (
    "Peak resident memory of the whole benchmark job (Python, torch and data included), "
    "against the reference a common FL library needs for the same work."
)


def md_table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown (pipe) table by pandas' ``to_markdown``, each cell as written:
    no number parsing, which would reprint the cells we formatted (0.300 as 0.3)."""
    return frame.to_markdown(index=False, disable_numparse=True)


def _verdict(ok: bool) -> str:
    return "meets" if ok else "misses"


def _engine_row(name: str, r: dict, goal: float) -> dict:
    if "skipped" in r:
        return {"workload": name, "device": r["spec"].get("device"), "note": r["skipped"]}
    s, spec = r["phase_shares"], r["spec"]
    split = ("data", "evaluate", "aggregate", "checkpoint", "other")
    return {
        "workload": name,
        "device": r["machine"].get("gpu") or r["machine"]["device"],
        "backbone": f"{spec['backbone']} ({spec['tuning']}) @{spec['img_size']}",
        "precision": r.get("precision", "fp32"),
        "samples/s": f"{r['samples_per_s']:,.0f}",
        "model GFLOP/s": f"{r['model_flops_per_s'] / 1e9:,.1f}",
        f"matmul GFLOP/s ({r['matmul_dtype']})": f"{r['matmul_flops_per_s'] / 1e9:,.1f}",
        "MFU": f"{r['mfu']:.1%}",
        "MFU in steps": f"{r['step_mfu']:.1%}",
        "outside steps": f"{r['overhead_share']:.1%} "
        f"({_verdict(r['overhead_share'] <= goal)} ≤ {goal:.0%})",
        "outside steps, evaluation aside": f"{r['overhead_share'] - s['evaluate']:.1%}",
        "data / eval / agg / ckpt / other": " / ".join(f"{100 * s[p]:.1f}" for p in split),
        "peak RSS MB": f"{r['peak_rss_mb']:,.0f}",
        "peak GPU MB": "" if r["peak_gpu_mb"] is None else f"{r['peak_gpu_mb']:,.0f}",
    }


def _memory(memory: dict, reference: float) -> pd.DataFrame:
    spec = memory["spec"]
    return pd.DataFrame([{
        "work": f"FedAvg {spec['backbone']}, {spec['clients']} clients, {spec['samples']:,} "
                f"train + {spec['test']:,} test images of {spec['img_size']} px, "
                f"{spec['rounds']} round",
        "peak RSS MB": f"{memory['peak_rss_mb']:,.0f}",
        "reference MB": f"{reference:,.0f}",
        "verdict": f"{_verdict(memory['peak_rss_mb'] <= reference)} (≤ reference)",
        "round seconds": f"{memory['round_seconds']:.1f}",
    }])  # fmt: skip


def _clients(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{
        "clients": r["clients"],
        "s/round": f"{r['round_seconds']:.2f}",
        "samples/s": f"{r['samples_per_s']:,.0f}",
        "outside steps": f"{r['overhead_share']:.1%}",
    } for r in rows])  # fmt: skip


def _rounds(history: list[dict]) -> pd.DataFrame:
    half = len(history) // 2
    first, second = history[1:half], history[half:]

    def mean(rows: list[dict]) -> str:
        return f"{sum(r['seconds'] for r in rows) / max(1, len(rows)):.3f}"

    return pd.DataFrame([{
        f"s/round (rounds 2…{half})": mean(first),
        f"s/round (rounds {half + 1}…{len(history)})": mean(second),
        "RSS MB after round 1": f"{history[0]['rss_mb']:,.0f}",
        f"RSS MB after round {len(history)}": f"{history[-1]['rss_mb']:,.0f}",
    }])  # fmt: skip


def _dag(rows: list[dict]) -> pd.DataFrame:
    ordered = sorted(rows, key=lambda r: r["jobs"])
    return pd.DataFrame([{"target": r["target"], "jobs": r["jobs"],
                          "seconds": f"{r['seconds']:.1f}"} for r in ordered])  # fmt: skip


def _cost(cost: dict) -> tuple[str, pd.DataFrame]:
    rows = []
    for paper, v in cost["papers"].items():
        items = ", ".join(f"{k} {h:,.1f}" for k, h in v["by_item"].items())
        rows.append({"paper": paper, "runs": v["runs"], "adaptations": v.get("adapts", 0),
                     "PFLOP": f"{v['flops'] / 1e15:,.0f}",
                     "GPU-hours": f"{v['gpu_hours']:,.1f}",
                     "all bf16 (h)": f"{v['bf16_gpu_hours']:,.1f}",
                     "per item (h)": items})  # fmt: skip
    papers = cost["papers"].values()
    rows.append({"paper": "total", "runs": sum(v["runs"] for v in papers),
                 "adaptations": sum(v.get("adapts", 0) for v in papers),
                 "PFLOP": f"{sum(v['flops'] for v in papers) / 1e15:,.0f}",
                 "GPU-hours": f"{cost['total_gpu_hours']:,.1f}",
                 "all bf16 (h)": f"{cost['total_bf16_gpu_hours']:,.1f}",
                 "per item (h)": ""})  # fmt: skip
    text = (
        f"Each run at its own arithmetic (train.precision, train.tf32: convolutions and matmuls "
        f"on fp32, TF32 or bf16 units); 'all bf16': the same FLOPs at the bf16 rate. "
        f"On {cost['device']} ({cost['throughput']}). Goal for all five papers: "
        f"{cost['goal_gpu_hours']:.0f} GPU-hours; the papers in the plan now "
        f"({', '.join(cost['papers_in_plan'])}) need {cost['total_gpu_hours']:,.0f}: "
        f"{_verdict(cost['within_goal'])} the goal. A run shared by items counts in each item."
    )
    return text, pd.DataFrame(rows)


def write_summary(out: Path, results: dict, goals: dict) -> list[Path]:
    """``summary.md`` and ``summary.html``; ``results`` holds ``engine`` (name → workload
    result), ``memory``, ``rounds`` (workload results), ``clients``, ``dag`` and ``cost``."""
    engine = results["engine"]
    machine = next((r["machine"] for r in engine.values() if "machine" in r), {})
    cost_text, cost_frame = _cost(results["cost"])
    sections = [
        ("Machine", f"{machine.get('cpu')} · {machine.get('logical_cores')} logical cores · "
         f"torch {machine.get('torch')} · {machine.get('torch_threads')} torch threads per "
         "job. Measured on this machine in this run, on random in-memory images.", None),
        ("Engine efficiency (FedAvg, 10 clients, 1 local epoch)", ENGINE_TEXT,
         pd.DataFrame([_engine_row(k, r, goals["overhead"]) for k, r in engine.items()])
         .fillna("")),
        ("Memory", MEMORY_TEXT, _memory(results["memory"], goals["memory_reference_mb"])),
        ("Scaling with clients", "Same total data, split over more clients.",
         _clients(results["clients"])),
        ("Scaling with rounds", "First half against second half of the rounds.",
         _rounds(results["rounds"]["history"])),
        ("Paper-scale DAG planning", "`snakemake -n --configfile config/paper.yaml`.",
         _dag(results["dag"])),
        ("Cost of the paper scale", cost_text, cost_frame),
    ]  # fmt: skip
    md, page = ["# Benchmarks", ""], ["<h1>Benchmarks</h1>"]
    for title, text, frame in sections:
        md += [f"## {title}", "", text, ""]
        page += [f"<h2>{html.escape(title)}</h2>", f"<p>{html.escape(text)}</p>"]
        if frame is not None:
            md += [md_table(frame), ""]
            page.append(frame.to_html(index=False, border=0))
    out = Path(out)
    return [
        write_text(out.with_suffix(".md"), "\n".join(md)),
        write_text(out.with_suffix(".html"), "\n".join(page)),
    ]
