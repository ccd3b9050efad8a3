"""The DAG end to end at a tiny scale: a table is built, rebuilt for free (its config's keys
reordered too), and a change to one algorithm's hyperparameter retrains only that
algorithm's runs."""

from __future__ import annotations

import json
import re

import yaml

from tests.workflow_helpers import copy_workflow, snakemake


def _shrink(wf):
    """One dataset, one partition, two algorithms, both variants, two seeds, two rounds."""
    cfg_path = wf / "config" / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["scales"]["mini"]["data"] = {
        "per_class_train": 12,
        "per_class_test": 6,
        "size": 16,
        "seed": 0,
    }
    pre = cfg["scales"]["mini"]["pretrain"]
    pre.update(epochs=1, data={"per_class_train": 4, "per_class_test": 2, "size": 16, "seed": 0})
    cfg_path.write_text(yaml.safe_dump(cfg))
    exp_path = wf / "config" / "experiments" / "adapters.yaml"
    exp = yaml.safe_load(exp_path.read_text())
    exp["scales"]["mini"]["seeds"] = [0, 1]
    exp["scales"]["mini"]["defaults"]["train"].update(rounds=2, schedule={"kind": "constant"})
    exp["grids"]["silo"].update(dataset=["CIFAR-10"], partition=["Dir(0.5)"],
                                algorithm=["FedAvg", "FedProx"])  # fmt: skip
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    return exp_path, exp


def _job_counts(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", stdout, re.M)}


def test_table_target_end_to_end_then_reruns_nothing_then_retrains_one_algorithm(tmp_path):
    wf = copy_workflow(tmp_path)
    exp_path, exp = _shrink(wf)
    res = snakemake("adapters_table1", "adapters_fig5", "--cores", "2", cwd=wf)
    assert res.returncode == 0, res.stderr[-3000:]
    out = wf / "results" / "mini"
    for ext in ("md", "tex", "csv", "html"):
        assert (out / "tables" / "adapters" / f"table1.{ext}").stat().st_size > 0
    assert (out / "figures" / "adapters" / "fig5.png").stat().st_size > 0
    md = (out / "tables" / "adapters" / "table1.md").read_text()
    assert "NOT a reproduction of the paper's numbers" in md
    assert len(list((out / "runs").glob("*/metrics.json"))) == 8
    assert "Average difference" in md

    again = snakemake("adapters_table1", "-n", cwd=wf)
    assert "Nothing to be done" in again.stdout + again.stderr

    # the same config with its keys in another order is the same config: no job reruns
    # (the jobs' member JSON is written with sorted keys; before, Snakemake's params
    # provenance retrained FedProx's runs)
    fedprox = exp["axes"]["algorithm"]["FedProx"]["algorithm"]
    exp["axes"]["algorithm"]["FedProx"]["algorithm"] = dict(reversed(list(fedprox.items())))
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    reordered = snakemake("adapters_table1", "-n", cwd=wf)
    assert "Nothing to be done" in reordered.stdout + reordered.stderr, reordered.stdout[-2000:]

    exp["axes"]["algorithm"]["FedProx"]["algorithm"]["mu"] = 0.1
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    changed = snakemake("adapters_table1", "-n", cwd=wf)
    counts = _job_counts(changed.stdout)
    # one job per configuration trains both its seeds (config runs_per_job: seeds): the two
    # FedProx configurations (with and without adapters), 4 runs; FedAvg's stay
    assert counts.get("train") == 2, changed.stdout[-2000:]
    retrained = re.findall(r"wildcards: batch=(\w+)-", changed.stdout)
    assert retrained == ["fedprox"] * 2, retrained


def test_fedavg_ft_table_builds_and_an_adapt_option_reruns_only_adaptation(tmp_path):
    wf = copy_workflow(tmp_path)
    _shrink(wf)  # small data and pretraining
    exp_path = wf / "config" / "experiments" / "baselines.yaml"
    exp = yaml.safe_load(exp_path.read_text())
    mini = exp["scales"]["mini"]
    mini["seeds"] = [0]
    mini["defaults"]["train"]["rounds"] = 2
    mini["defaults"]["model"] = {"backbone": "cnn_simple", "pretrained": False, "img_size": 32}
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))

    dry = snakemake("baselines_finetune", "-n", cwd=wf)
    assert _job_counts(dry.stdout).get("adapt") == 1, dry.stdout[-2000:]
    res = snakemake("baselines_finetune", "--cores", "2", cwd=wf)
    assert res.returncode == 0, res.stderr[-3000:]
    table = (wf / "results/mini/tables/baselines/finetune.csv").read_text()
    assert "FedAvg-FT" in table and "FT gain" in table
    adapted = wf / "results/mini/adapt"
    adapt_dirs = [p for p in adapted.glob("finetune-fedavg-*") if p.is_dir()]
    assert len(adapt_dirs) == 1 and (adapt_dirs[0] / "metrics.json").exists()
    record = json.loads(next(adapted.glob("finetune-fedavg-*.json")).read_text())
    assert [r["run"] for r in record["runs"]] == [adapt_dirs[0].name]  # the job's record

    mini["axes"]["method"]["FedAvg-FT"]["adapt"]["epochs"] = 3  # an adaptation option
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    counts = _job_counts(snakemake("baselines_finetune", "-n", cwd=wf).stdout)
    assert counts.get("adapt") == 1 and "train" not in counts, counts

    mini["defaults"]["train"]["lr"] = 0.02  # a training option: the run and what reads it
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    counts = _job_counts(snakemake("baselines_finetune", "-n", cwd=wf).stdout)
    assert counts.get("train") == 1 and counts.get("adapt") == 1, counts


def test_test_time_methods_share_one_fedavg_run_and_a_tta_option_reruns_only_its_jobs(tmp_path):
    """FedICON's Table 1 in miniature: Tent and T3A adapt the same FedAvg run (one training);
    changing Tent's rate reruns only Tent's adaptation job."""
    wf = copy_workflow(tmp_path)
    _shrink(wf)
    cfg_path = wf / "config" / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["papers"] = ["fedicon"]
    cfg["scales"]["mini"]["datasets"]["digit5"] = {"per_class_train": 6, "per_class_test": 4}
    cfg_path.write_text(yaml.safe_dump(cfg))
    exp_path = wf / "config" / "experiments" / "fedicon.yaml"
    exp = yaml.safe_load(exp_path.read_text())
    mini = exp["scales"]["mini"]
    mini["seeds"] = [0]
    mini["defaults"]["train"]["rounds"] = 1
    mini["defaults"]["eval_every"] = 1
    exp["grids"] = {"covariate": {"setting": ["Digit-5"], "method": ["FedAvg", "Tent", "T3A"]}}
    mini.pop("grids")  # the mini sweeps of grids this copy drops
    exp["items"] = {"table1": {**exp["items"]["table1"], "where": {}}}
    exp["claims"] = []
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))

    counts = _job_counts(snakemake("fedicon_table1", "-n", cwd=wf).stdout)
    assert counts.get("train") == 1 and counts.get("adapt") == 2, counts
    res = snakemake("fedicon_table1", "--cores", "2", cwd=wf)
    assert res.returncode == 0, res.stderr[-3000:]
    table = (wf / "results/mini/tables/fedicon/table1.csv").read_text()
    assert "Tent" in table and "T3A" in table and "mnistm" in table

    mini["axes"]["method"]["Tent"]["adapt"]["lr"] = 0.001  # a test-time option
    exp_path.write_text(yaml.safe_dump(exp, sort_keys=False))
    changed = snakemake("fedicon_table1", "-n", cwd=wf)
    counts = _job_counts(changed.stdout)
    assert counts.get("adapt") == 1 and "train" not in counts, counts
    assert re.findall(r"wildcards: adapt=(\w+)-", changed.stdout) == ["tent"]
