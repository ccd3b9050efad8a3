"""What the GPU check (``snakemake gpu_check``, config ``gpu_check``; docs/gpu.md) runs beside
the paper-shape smoke, chosen at planning time (no torch): the training and adaptation jobs
run a second time and compared file by file, the training job killed after its first round
and resumed, and the run families whose step is timed at the paper's batch.

``repeat`` and ``step_time.families`` are ``all`` or a number n: the n cheapest (fewest
FLOPs, ``fedrepro.cost.work``) jobs or runs, so a CPU keeps every code path of the check
working in minutes (the smoke test's) while a GPU checks everything."""

from __future__ import annotations

from fedrepro.cost.work import WorkTable, engine_run

__all__ = ["CHECK", "DISCIPLINE", "checked"]

CHECK = "gpu_check"  # the folder under results/<scale>/ and the target's name
# the variable naming the folder of the jobs' discipline reports (fedrepro.discipline.ENV,
# a module that imports torch: the workflow plans without it)
DISCIPLINE = "FEDREPRO_DISCIPLINE"


def _cheapest(keys: list[str], flops, most) -> list[str]:
    ranked = sorted(keys, key=lambda k: (flops(k), k))
    return ranked if most == "all" else ranked[: int(most)]


def checked(plan, table: WorkTable, cfg: dict) -> dict:
    """``repeat_train`` and ``repeat_adapt`` (job ids), ``resume`` (a training job id, or
    None), ``steps`` (run ids, one a family: a smoke run is one combination) of ``plan``
    under the check's settings ``cfg`` (config ``gpu_check``)."""

    def run_flops(rid: str) -> float:
        return table.work(plan.runs[rid])["flops"]

    def train_flops(job: str) -> float:
        return sum(run_flops(r) for r in plan.train_jobs[job])

    def adapt_flops(job: str) -> float:
        return sum(table.work(engine_run(plan, a))["flops"] for a in plan.adapt_jobs[job])

    repeat = cfg.get("repeat", "all")
    trains = _cheapest(list(plan.train_jobs), train_flops, "all")
    families = cfg.get("step_time", {}).get("families", "all")
    return {
        "repeat_train": trains if repeat == "all" else trains[: int(repeat)],
        "repeat_adapt": _cheapest(list(plan.adapt_jobs), adapt_flops, repeat),
        "resume": trains[0] if cfg.get("resume", True) and trains else None,
        "steps": _cheapest(list(plan.runs), run_flops, families),
    }
