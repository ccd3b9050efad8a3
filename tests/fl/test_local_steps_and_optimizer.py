"""Engine growth for FedPCE: a step budget per round, parameter groups with their own rates,
and each client's optimiser state kept across rounds (and across a resume)."""

from __future__ import annotations

import pytest
import torch

from fedrepro.fl.local import train_epochs
from fedrepro.fl.optim import (
    group_lr,
    load_optimizer_state,
    make_optimizer,
    optimizer_state,
    param_groups,
)
from tests.fl_helpers import TinyNet, problem, run, run_killed_at, train_cfg


def test_local_steps_take_exactly_that_many_steps_across_passes():
    data, clients = problem(num_clients=1, per_client=20)
    tcfg = {**train_cfg()["train"], "local_steps": 7}  # 20 samples, batch 8: 3 steps a pass
    steps, _ = train_epochs(TinyNet(), data, clients.train[0], tcfg, 0.05, 1, torch.Generator())
    assert steps == 7


def test_a_step_budget_ends_when_the_objective_selects_nothing_in_a_whole_pass():
    """EATA's objective can select no test sample in any batch (paper-shape smoke: an EATA
    adaptation under the run's local_steps looped forever, 0 of 2 steps taken)."""
    data, clients = problem(num_clients=1, per_client=20)
    tcfg = {**train_cfg()["train"], "local_steps": 7}
    calls = []

    def selects_nothing(x, y):
        calls.append(len(x))
        if len(calls) > 100:
            raise AssertionError("the step budget loop does not end")
        return None

    steps, loss = train_epochs(
        TinyNet(), data, clients.train[0], tcfg, 0.05, 1, torch.Generator(),
        objective=selects_nothing,
    )  # fmt: skip
    assert steps == 0 and loss != loss  # NaN: no step taken
    assert len(calls) == 3  # one pass of 20 samples at batch 8


def test_param_groups_train_at_their_own_scheduled_rates():
    tcfg = {
        "lr": 1e-4,
        "rounds": 10,
        "schedule": {"kind": "cosine", "min_lr": 1e-6},
        "param_groups": [{"match": "fc.", "lr": 0.1, "min_lr": 1e-4}, {"match": "bn.", "lr": 1e-2}],
    }
    groups = param_groups(TinyNet(), tcfg, 1)
    assert [g["lr"] for g in groups] == [0.1, 1e-2, 1e-4]
    assert [len(g["params"]) for g in groups] == [2, 2, 2]  # fc, bn, conv: weight and bias
    last = param_groups(TinyNet(), tcfg, 11)  # past T_max the cosine is at its floor
    assert [g["lr"] for g in last] == pytest.approx([1e-4, 1e-6, 1e-6])
    assert group_lr(tcfg, {"lr": 0.1, "min_lr": 1e-4}, 6) == pytest.approx((0.1 + 1e-4) / 2)
    assert isinstance(param_groups(TinyNet(), {"lr": 0.1}, 1)[0], torch.nn.Parameter)


def test_optimizer_state_round_trips_into_a_new_optimizer():
    model = TinyNet()
    opt = make_optimizer(list(model.parameters()), {"optimizer": "adam"}, 0.01)
    model(torch.rand(4, 3, 6, 6)).sum().backward()
    opt.step()
    saved = optimizer_state(opt)
    fresh = make_optimizer(list(model.parameters()), {"optimizer": "adam"}, 0.5)
    load_optimizer_state(fresh, saved)
    p = next(model.parameters())
    assert torch.equal(fresh.state[p]["exp_avg"], opt.state[p]["exp_avg"])
    assert fresh.param_groups[0]["lr"] == 0.5  # rates come from the round, not the state
    with pytest.raises(ValueError, match="optimizer state"):
        load_optimizer_state(fresh, saved[:-1])


def _adam(**over):
    return train_cfg(optimizer="adam", lr=0.01, momentum=0.0, rounds=4, **over)


def test_kept_optimizer_state_changes_training_and_resumes_identically(tmp_path):
    fresh, _, _ = run({"name": "fedavg"}, _adam())
    kept_cfg = _adam(checkpoint_every=1)
    kept_cfg["train"]["optimizer_state"] = "client"
    kept, _, _ = run({"name": "fedavg"}, kept_cfg)
    assert [r["loss"] for r in kept.history] != [r["loss"] for r in fresh.history]
    assert sorted(kept.optim) == [0, 1, 2, 3]

    ckpt = tmp_path / "ckpt.pt"
    run_killed_at(3, {"name": "fedavg"}, kept_cfg, ckpt)
    resumed, _, _ = run({"name": "fedavg"}, kept_cfg, checkpoint=ckpt)
    for k in kept.shared:
        assert torch.equal(kept.shared[k], resumed.shared[k]), k
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in kept.history]
