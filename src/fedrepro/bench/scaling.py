"""Round time as the number of clients grows over a fixed amount of data."""

from __future__ import annotations

from fedrepro.bench.workload import run_workload

KEEP = ("round_seconds", "samples_per_s", "overhead_share", "phase_shares", "peak_rss_mb")


def clients_scaling(spec: dict, counts: list[int], threads: int) -> list[dict]:
    """One workload per client count (the same ``samples`` split ever finer)."""
    rows = []
    for k in counts:
        result = run_workload({**spec, "clients": int(k)}, threads)
        rows.append({"clients": int(k), **{key: result[key] for key in KEEP}})
        print(f"clients={k}: {result['round_seconds']:.2f} s/round", flush=True)
    return rows
