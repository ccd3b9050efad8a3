"""Benchmark jobs: one workload, client scaling, DAG planning time, paper cost, the page,
the embedded default's time budget; the paper scale's work table (per-sample FLOPs and
sample counts the workflow plans runtimes with: `python workflow/scripts/bench.py work --out
config/flops/paper.json`); and its run families' device memory on the meta device, now and at
the old evaluation batch of 1,024 (`python workflow/scripts/bench.py memory --out
results/paper_memory.json`: the table of docs/smoke.md, printed)."""

import argparse
import json
from pathlib import Path

from fedrepro.atomic import write_json
from fedrepro.bench import budget, dag, driver, figures, scaling, summary, workload
from fedrepro.cost import estimate as cost
from fedrepro.cost import job_memory
from fedrepro.experiments.config import load_yaml
from fedrepro.experiments.plan import paper_plan
from fedrepro.fl.build import pick_device


def _load(paths):
    return [json.loads(Path(p).read_text()) for p in paths]


p = argparse.ArgumentParser(description=__doc__)
p.add_argument(
    "what", choices=["workload", "clients", "dag", "cost", "page", "budget", "work", "memory"]
)
p.add_argument("--spec-json", default="{}", help="settings (JSON; cost, work: bench.cost)")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--inputs", nargs="*", default=[], help="result files the step reads")
p.add_argument("--out", type=Path, required=True)
a = p.parse_args()
spec = json.loads(a.spec_json)
pick_device("cpu", a.threads)

if a.what == "workload":
    result = workload.run_workload(spec, a.threads)
    print(json.dumps({k: v for k, v in result.items() if k != "history"}, indent=1))
    write_json(a.out, result)
elif a.what == "clients":
    write_json(a.out, scaling.clients_scaling(spec["spec"], spec["counts"], a.threads))
elif a.what == "dag":
    rows = []
    for target in spec["targets"]:
        rows.append(dag.dry_run_seconds(target, Path.cwd()))
        print(rows[-1], flush=True)
    write_json(a.out, rows)
elif a.what == "cost":
    memo = cost.committed_memo(Path("config/flops/paper.json"))  # the table, not recounted
    result = cost.estimate(Path.cwd(), spec, cost.measured_rate(_load(a.inputs)), memo=memo)
    print(json.dumps(result, indent=1))
    write_json(a.out, result)
elif a.what == "work":
    memo: dict = {}
    cost_cfg = spec or load_yaml(Path("config/config.yaml"))["bench"]["cost"]
    result = cost.estimate(Path.cwd(), cost_cfg, memo=memo)
    print(f"{result['total_gpu_hours']:,.1f} GPU-hours ({result['device']})")
    write_json(a.out, cost.work_table(memo))
elif a.what == "page":
    named = dict(zip(spec["names"], _load(a.inputs), strict=True))
    results = {
        "engine": {k: named[k] for k in spec["engine"]},
        "memory": named[spec["memory"]],
        "rounds": named[spec["rounds"]],
        **{k: named[k] for k in ("clients", "dag", "cost")},
    }
    figures.save_all(results, a.out.parent)
    summary.write_summary(a.out, results, spec["goals"])
elif a.what == "budget":
    result = budget.budget(
        Path(spec["root"]),
        spec["cores"],
        spec["limits"],
        driver.driver(),
        spec.get("bench"),
        spec.get("docs"),
    )
    print(json.dumps({k: v for k, v in result.items() if k != "papers"}, indent=1))
    write_json(a.out, result)
    budget.write_budget(a.out, result)
elif a.what == "memory":
    plan = paper_plan(Path.cwd())
    now, before = job_memory.family_memory(plan), job_memory.family_memory(plan, eval_batch=1024)
    write_json(a.out, {"now": now, "eval_1024": before})
    print(job_memory.memory_markdown(now, before))
