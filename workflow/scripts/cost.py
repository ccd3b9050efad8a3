"""What targets cost before they run, submitting nothing (fedrepro.cost.target_cost):

    python workflow/scripts/cost.py fedins_table1 fedhpl        # paper scale by default
    python workflow/scripts/cost.py all --configfile config/config.yaml config/paper.yaml

Prints the table and writes it as <out>.md and <out>.json."""

import argparse
from functools import reduce
from pathlib import Path

from fedrepro.atomic import atomic_write, write_json
from fedrepro.cost.target_cost import render, target_cost
from fedrepro.cost.work import WorkTable, calibration_of, known_sizes, pack_small_jobs
from fedrepro.experiments.config import ConfigError, deep_merge, load_yaml
from fedrepro.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
p.add_argument("targets", nargs="*", default=["all"], help="all, a paper, or <paper>_<item>")
p.add_argument("--configfile", nargs="+", type=Path,
               default=[REPO / "config/config.yaml", REPO / "config/paper.yaml"],
               help="config files, merged in order (as Snakemake's --configfile)")  # fmt: skip
p.add_argument("--profile", type=Path, default=REPO / "profiles/slurm/partitions.yaml",
               help="the Slurm partitions (their max_runtime)")  # fmt: skip
p.add_argument("--out", type=Path, help="output prefix (default results/cost/<targets>)")
a = p.parse_args()
try:
    config = reduce(deep_merge, (load_yaml(f) for f in a.configfile), {})
    plan = build_plan(config, REPO)
    table = WorkTable(
        REPO / "config" / "flops" / f"{config['scale']}.json",
        known_sizes(config["bench"]["cost"]["split_sizes"]),
        calibration_of(plan.scale_cfg, REPO),
    )
    pack_small_jobs(plan, table)  # as the workflow packs them
    cost = target_cost(plan, table, a.targets, a.profile, int(config["gpus_per_train"]))
except (ConfigError, ValueError) as err:
    raise SystemExit(f"cost: {err}") from None
out = a.out or Path(config["results"]) / "cost" / "-".join(a.targets)
page = render(cost)
atomic_write(f"{out}.md", lambda tmp: Path(tmp).write_text(page))
write_json(f"{out}.json", cost)
print(page)
