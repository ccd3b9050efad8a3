"""The workflow parses, lints, validates its config and expands the paper-scale DAG offline."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.workflow_helpers import REPO, snakemake


def test_lint_is_clean():
    res = snakemake("--lint")
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_rule_explains_itself():
    """`snakemake --list-rules` shows each rule with its docstring (none had one)."""
    res = snakemake("--list-rules")
    assert res.returncode == 0, res.stderr[-2000:]
    rules = [line for line in res.stdout.splitlines() if line and not line.startswith(" ")]
    assert {"train", "adapt", "prepare_data", "partition", "table", "figure"} <= {
        line.split(" ", 1)[0] for line in rules
    }
    assert [line for line in rules if " (" not in line] == []


def _counts(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", stdout, re.M)}


# the paper scale a job a run (no packs of small jobs): the grids' run counts as job counts
UNPACKED = Path(__file__).with_name("unpacked.yaml")


def test_paper_scale_dag_expands_offline():
    res = snakemake("adapters", "-n", "--configfile", "config/paper.yaml", str(UNPACKED))
    assert res.returncode == 0, res.stderr
    counts = _counts(res.stdout)
    # Tables I + II: 3 datasets × 5 partitions × 3 algorithms × 2 variants × 2 settings × 5
    # seeds = 900, plus the figure-only learning-rate runs of Figs. 6 and 8 (2 × 30).
    assert counts["train"] == 960
    assert counts["download_data"] == 3 and counts["fetch_backbone"] == 1
    tables = _counts(snakemake("adapters_table1", "adapters_table2", "-n", "--configfile",
                               "config/paper.yaml", str(UNPACKED)).stdout)  # fmt: skip
    assert tables["train"] == 900
    # packed (the paper scale's own setting): the same runs in far fewer Slurm jobs
    packed = _counts(snakemake("adapters", "-n", "--configfile", "config/paper.yaml").stdout)
    assert packed["train"] < counts["train"] / 5


def test_fedins_paper_grid():
    counts = _counts(snakemake("fedins", "-n", "--configfile", "config/paper.yaml",
                               str(UNPACKED)).stdout)  # fmt: skip
    # Table 1: 3 datasets × 9 methods × 3 seeds = 81; Table 2 adds Prompt, Prompt Pool and
    # SSF (27; SSF Pool is FedIns); Fig. 5: 7 methods × (11 β + 10 γ) × 3 = 441; Fig. 6:
    # 3 datasets × (6 new M + 8 new C) × 3 = 126 besides M = 25 / C = 3 of Table 1.
    assert counts["train"] == 81 + 27 + 441 + 126 == 675
    assert counts["download_data"] == 3 and counts["fetch_backbone"] == 1
    tables = _counts(snakemake("fedins_table1", "fedins_table2", "-n", "--configfile",
                               "config/paper.yaml", str(UNPACKED)).stdout)  # fmt: skip
    assert tables["train"] == 108


def test_target_rules_per_item_and_paper():
    res = snakemake("--list-target-rules")
    names = set(res.stdout.split())
    items = {"table1", "table2", "payload", *(f"fig{i}" for i in range(4, 10))}
    assert {"all", "adapters", *(f"adapters_{i}" for i in items)} <= names
    fedins = {"table1", "table2", "costs", "fig4", "fig5a", "fig5b", "fig6a", "fig6b"}
    assert {"fedins", *(f"fedins_{i}" for i in fedins)} <= names


def test_claims_read_the_reported_numbers_so_an_edited_transcription_reruns_them():
    res = snakemake("results/mini/claims/fedhpl.csv", "-n", "--forcerun", "claims")
    assert res.returncode == 0, res.stderr[-2000:]
    claims_job = res.stdout[res.stdout.index("rule claims:") :].split("output:")[0]
    assert "config/reported/fedhpl.csv" in claims_job


def test_the_rate_limit_wakes_the_scheduler_once_a_minute_at_most():
    """Snakemake 9 arms one wake-up per scheduling pass while a rate limit is set, and each
    finished job leaves one more for the rest of the run: with the default 1 s timespan the
    driver took 10 % of 2 cores by the end of the default. The workflow profile sets a minute
    (it overrides the Slurm profile's key, which must not set its own)."""
    from snakemake.settings.types import MaxJobsPerTimespan

    default = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(default["max-jobs-per-timespan"])
    assert limit.timespan >= 60 and limit.max_jobs / limit.timespan <= 20
    slurm = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    assert "max-jobs-per-timespan" not in slurm
