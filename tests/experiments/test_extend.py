"""Config ``methods`` (a method from outside the repository) and ``set`` (run options from the
command line): what the plan adds, which ids change, and the one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.experiments.config import ConfigError, load_yaml
from fedrepro.experiments.plan import build_plan
from tests.fl_helpers import run

REPO = Path(__file__).resolve().parents[2]

# the built-in FedProx copied outside the library under another name (docs/your_method.md's
# example is the same class)
BUILTIN = (REPO / "src/fedrepro/algorithms/fedprox.py").read_text()
MYPROX = BUILTIN.replace("class FedProx(", "class MyProx(").replace(
    'name = "fedprox"', 'name = "myprox"'
)
assert MYPROX.count("MyProx") == 1 and MYPROX.count('"myprox"') == 1


@pytest.fixture
def myprox(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "myprox.py"
    path.parent.mkdir()
    path.write_text(MYPROX)
    return path


def _config(**over) -> dict:
    cfg = load_yaml(REPO / "config/config.yaml")
    cfg["papers"] = ["fedpce", "fedins"]
    return {**cfg, **over}


def _methods(path: Path, **algorithm) -> dict:
    return {
        "MyProx": {
            "algorithm": {"name": "myprox", **algorithm},
            "from": str(path),
            "papers": ["fedpce", "fedins"],
        }
    }


def test_an_outside_method_is_a_row_of_the_grids_that_compare_methods(myprox):
    base = build_plan(_config(), REPO)
    plan = build_plan(_config(methods=_methods(myprox, mu=0.01)), REPO)
    new = set(plan.runs) - set(base.runs)
    assert set(base.runs) <= set(plan.runs)  # nothing else changes
    assert new and all(r.startswith("myprox-") for r in new)
    # FedPCE's main grid (3 datasets x 2 folds) and not its one-method sweeps (Tables 3-5)
    fedpce = {r for r in new if plan.runs[r]["paper"] == "fedpce"}
    assert len(fedpce) == 6
    rows = {r["labels"]["method"] for r in plan.items["fedpce/table1"]["runs"]}
    assert "MyProx" in rows
    assert all(r["labels"]["method"] == "FedPCE" for r in plan.items["fedpce/table3"]["runs"])
    algorithm = plan.runs[sorted(fedpce)[0]]["algorithm"]
    assert algorithm["from"]["file"] == str(myprox.resolve()) and algorithm["mu"] == 0.01
    claims = [c for c in plan.claims["fedpce"]["claims"] if c["id"].startswith("outside_")]
    assert {c["item"] for c in claims} == {"table1", "table2"}
    assert claims[0]["select"] == {"method": "MyProx"} and claims[0]["kind"] == "rank"
    # the parameters item counts the library's own rows only
    configs = plan.items["fedpce/params"].get("configs", [])
    assert configs and all(c["label"] != "MyProx" for c in configs)


def test_a_change_to_the_file_retrains_its_runs_only(myprox):
    first = build_plan(_config(methods=_methods(myprox)), REPO)
    myprox.write_text(MYPROX + "\n# a change\n")
    second = build_plan(_config(methods=_methods(myprox)), REPO)
    changed = set(first.runs) ^ set(second.runs)
    assert changed and all(r.startswith("myprox-") for r in changed)
    assert {r for r in first.runs if not r.startswith("myprox-")} <= set(second.runs)


def test_a_typo_in_its_options_is_one_line_naming_the_key(myprox):
    with pytest.raises(ConfigError) as err:
        build_plan(_config(methods=_methods(myprox, muu=0.1)), REPO)
    assert str(err.value) == (
        "config methods.MyProx.algorithm.muu: unknown option of algorithm myprox "
        "(allowed: buffers, mu, weighting)"
    )
    with pytest.raises(ConfigError, match=r"defines no algorithm named 'myprx'.*myprox"):
        build_plan(_config(methods={"X": {**_methods(myprox)["MyProx"],
                                          "algorithm": {"name": "myprx"}}}), REPO)  # fmt: skip


def test_planning_an_outside_method_imports_no_torch(myprox):
    code = (
        "import sys; from pathlib import Path;"
        "from fedrepro.experiments.plan import build_plan;"
        "from fedrepro.experiments.config import load_yaml;"
        f"cfg = load_yaml(Path({str(REPO / 'config/config.yaml')!r}));"
        "cfg['papers'] = ['fedpce'];"
        f"cfg['methods'] = {{'M': {{'algorithm': {{'name': 'myprox'}}, 'from': {str(myprox)!r},"
        " 'papers': ['fedpce']}};"
        f"build_plan(cfg, Path({str(REPO)!r}));"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_outside_copy_of_fedprox_trains_to_the_bit_as_the_built_in(myprox):
    source = build_plan(_config(methods=_methods(myprox)), REPO)
    block = next(r for r in source.runs.values() if r["algorithm"]["name"] == "myprox")
    outside = {**block["algorithm"], "mu": 0.05}
    state_in, _, _ = run({"name": "fedprox", "mu": 0.05})
    state_out, alg, _ = run(outside)
    assert type(alg).__name__ == "MyProx"
    for key, value in state_in.shared.items():
        assert torch.equal(value, state_out.shared[key]), key


def test_a_file_changed_after_planning_is_refused(myprox):
    plan = build_plan(_config(methods=_methods(myprox)), REPO)
    block = next(r for r in plan.runs.values() if r["algorithm"]["name"] == "myprox")
    myprox.write_text(MYPROX + "\n")
    with pytest.raises(ValueError, match="changed after the plan named it"):
        make_algorithm(block["algorithm"])


def test_set_gives_new_ids_to_the_runs_it_selects_and_to_no_other():
    base = build_plan(_config(), REPO)
    entry = {"where": {"paper": "fedpce", "method": "FedAvg"}, "set": {"train": {"lr": 0.05}}}
    plan = build_plan(_config(set=[entry]), REPO)
    gone, new = set(base.runs) - set(plan.runs), set(plan.runs) - set(base.runs)
    assert gone and len(gone) == len(new)
    assert all(base.runs[r]["algorithm"]["name"] == "fedavg" for r in gone)
    assert all(base.runs[r]["paper"] == "fedpce" for r in gone)
    assert all(plan.runs[r]["train"]["lr"] == 0.05 for r in new)


def test_set_typos_are_one_line_naming_the_key():
    bad_value = {"where": {"paper": "fedpce", "method": "FedAvv"}, "set": {"train": {"lr": 1}}}
    with pytest.raises(ConfigError, match=r"config set\[0\]\.where\.method: 'FedAvv'"):
        build_plan(_config(set=[bad_value]), REPO)
    bad_axis = {"where": {"methd": "FedAvg"}, "set": {"train": {"lr": 1}}}
    with pytest.raises(ConfigError, match=r"config set\[0\]\.where: \['methd'\] are not axes"):
        build_plan(_config(set=[bad_axis]), REPO)
    bad_key = {"where": {"paper": "fedpce"}, "set": {"train": {"lrr": 1}}}
    with pytest.raises(ConfigError, match="lrr"):
        build_plan(_config(set=[bad_key]), REPO)


def test_the_cost_model_prices_an_outside_method_as_the_built_in_it_names(myprox):
    from fedrepro.cost.work import flops_key

    methods = _methods(myprox)
    methods["MyProx"]["priced_as"] = "fedprox"
    plan = build_plan(_config(methods=methods), REPO)
    run = next(r for r in plan.runs.values() if r["algorithm"]["name"] == "myprox")
    builtin = {**run, "algorithm": {"name": "fedprox", "mu": 0.01}}
    assert flops_key(run) == flops_key(builtin)
    with pytest.raises(ConfigError, match=r"methods\.MyProx\.priced_as: 'fedprx'"):
        methods["MyProx"]["priced_as"] = "fedprx"
        build_plan(_config(methods=methods), REPO)
