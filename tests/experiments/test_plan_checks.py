"""Bad input the plan refuses in one line naming the file and the key (before, each one was
accepted and ignored, or failed only when its job ran): an option its algorithm, tuning or
adaptation method does not take, a ``where:`` naming no axis or value of its grid, a
malformed transcription. tests/faults/bad_configs.yaml runs such cases through Snakemake."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fedrepro.experiments.config import ConfigError, load_yaml
from fedrepro.experiments.plan import build_plan

REPO = Path(__file__).resolve().parents[2]


def _plan(config_dir: Path, paper: str) -> None:
    config = load_yaml(REPO / "config/config.yaml") | {"papers": [paper]}
    build_plan(config, config_dir.parent)


def copy_config(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path / "config"


def set_key(config: Path, paper: str, at: list, value) -> None:
    """Set the key at path ``at`` of a copied experiment file to ``value``."""
    path = config / "experiments" / f"{paper}.yaml"
    doc = yaml.safe_load(path.read_text())
    node = doc
    for key in at[:-1]:
        node = node[key]
    node[at[-1]] = value
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


OPTIONS = [
    ("adapters", ["axes", "algorithm", "FedProx", "algorithm", "muu"], 0.1,
     "config/experiments/adapters.yaml axes.algorithm.FedProx.algorithm.muu: unknown option of "
     "algorithm fedprox (allowed: buffers, mu, weighting)"),
    ("fedhpl", ["axes", "method", "FedHPL", "model", "tuning_options", "num_promts"], 3,
     "config/experiments/fedhpl.yaml axes.method.FedHPL.model.tuning_options.num_promts: "
     "unknown option of tuning vpt_deep (allowed: num_prompts)"),
    ("baselines", ["axes", "method", "FedAvg-FT", "adapt", "filter_k"], 3,
     "config/experiments/baselines.yaml axes.method.FedAvg-FT.adapt.filter_k: unknown option "
     "of adapt method finetune (allowed: batch_size, epochs, eval_every, lr, momentum, shift, "
     "weight_decay)"),
    ("adapters", ["items", "table1", "where"], {"datset": "SVHN"},
     "config/experiments/adapters.yaml items.table1.where.datset: not an axis of grid silo"),
    ("adapters", ["items", "table1", "where"], {"dataset": "SVHNN"},
     "config/experiments/adapters.yaml items.table1.where.dataset: 'SVHNN' is not one of its "
     "values (allowed: SVHN, CIFAR-10, FashionMNIST)"),
    ("fedpce", ["overrides", 0, "where", "methd"], "FedAvg",
     "config/experiments/fedpce.yaml overrides[0].where.methd: not an axis of the file"),
    ("fedpce", ["overrides", 0, "where", "method"], ["FedAvg", "FedProxx"],
     "config/experiments/fedpce.yaml overrides[0].where.method: 'FedProxx' is not one of its "
     "values"),
]  # fmt: skip


@pytest.mark.parametrize("paper,at,value,message", OPTIONS, ids=lambda v: str(v)[:40])
def test_a_bad_option_or_selection_stops_the_plan_naming_file_and_key(
    tmp_path, paper, at, value, message
):
    config = copy_config(tmp_path)
    set_key(config, paper, at, value)
    with pytest.raises(ConfigError) as err:
        _plan(config, paper)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


TRANSCRIPTIONS = [  # (file, line, text, replacement, message)
    ("adapters.csv", 3, "table1,", '"table1,', "adapters.csv:3: a quote is not closed"),
    ("adapters.csv", 5, ",0.69", "", "adapters.csv:5: 8 fields, the header has 9"),
    ("adapters.csv", 4, "96.15", "96.l5", "adapters.csv:4: value '96.l5' is not a number"),
    ("adapters.csv", 6, ",0.", ",O.", "adapters.csv:6: std 'O."),
    ("adapters_payload.csv", 2, "22.2", "22.2MB", "adapters_payload.csv:2: value"),
]  # fmt: skip


@pytest.mark.parametrize("name,line,old,new,message", TRANSCRIPTIONS, ids=lambda v: str(v)[:20])
def test_a_malformed_transcription_stops_the_plan_naming_file_and_line(
    tmp_path, name, line, old, new, message
):
    config = copy_config(tmp_path)
    path = config / "reported" / name
    lines = path.read_text().split("\n")
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("\n".join(lines))
    with pytest.raises(ConfigError, match="^config/reported/" + message.replace(".", r"\.")):
        _plan(config, "adapters")


def test_a_printed_count_may_carry_its_suffix_and_a_std_may_be_blank(tmp_path):
    _plan(copy_config(tmp_path), "fedpce")  # fedpce_params.csv prints 11.2M; fedpce.csv blank stds


def test_an_experiment_file_that_is_not_yaml_stops_the_plan_naming_file_and_line(tmp_path):
    config = copy_config(tmp_path)
    path = config / "experiments" / "baselines.yaml"
    path.write_text(path.read_text().replace("\naxes:", "\naxes: [", 1))
    with pytest.raises(ConfigError, match=r"baselines\.yaml:\d+: not YAML \(expected"):
        _plan(config, "baselines")
