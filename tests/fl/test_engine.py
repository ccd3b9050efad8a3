"""Engine behaviour: resume, determinism, non-finite updates, schedules."""

from __future__ import annotations

import re
import time

import pytest
import torch

from fedrepro.algorithms.fedavg import FedAvg
from fedrepro.fl import engine
from fedrepro.fl.engine import run_rounds
from fedrepro.fl.optim import lr_at
from fedrepro.logs import Pace
from tests.fl_helpers import TinyNet, problem, run, run_killed_at, train_cfg, untimed


def test_resume_from_checkpoint_gives_identical_results(tmp_path):
    cfg = train_cfg(rounds=5, checkpoint_every=1)
    full, _, _ = run({"name": "scaffold"}, cfg)

    ckpt = tmp_path / "ckpt.pt"
    run_killed_at(3, {"name": "scaffold"}, cfg, ckpt)
    assert ckpt.exists()
    resumed, _, _ = run({"name": "scaffold"}, cfg, checkpoint=ckpt, log=lambda _: None)
    for k in full.shared:
        assert torch.equal(full.shared[k], resumed.shared[k]), k
    assert [r["acc"] for r in full.history] == [r["acc"] for r in resumed.history]


def test_same_seed_same_numbers_other_seed_other_numbers():
    a, _, _ = run({"name": "fedavg"})
    b, _, _ = run({"name": "fedavg"})
    c, _, _ = run({"name": "fedavg"}, train_cfg(seed=1))
    assert [r["loss"] for r in a.history] == [r["loss"] for r in b.history]
    assert [r["loss"] for r in a.history] != [r["loss"] for r in c.history]


class PoisonOnce(FedAvg):
    """Client 0 sends NaN in round 2."""

    def client_end(self, ctx):
        payload = super().client_end(ctx)
        self.calls = getattr(self, "calls", 0) + 1
        if ctx.client == 0 and self.calls > 4 and self.calls <= 8:
            payload.tensors["conv.weight"] = payload.tensors["conv.weight"] * float("nan")
        return payload


def _run_poisoned(nonfinite):
    data, clients = problem()
    torch.manual_seed(0)
    cfg = train_cfg(rounds=3, nonfinite=nonfinite)
    return run_rounds(cfg, TinyNet(), PoisonOnce(), data, data, clients, log=lambda _: None)


def test_nan_update_is_excluded_and_flagged():
    state = _run_poisoned("exclude")
    flags = [(r["diverged"], r["excluded"]) for r in state.history]
    assert flags == [(False, 0), (True, 1), (False, 0)]
    assert all(torch.isfinite(v).all() for v in state.shared.values())


def test_nan_update_kept_propagates_and_is_recorded():
    state = _run_poisoned("keep")
    assert [r["diverged"] for r in state.history] == [False, True, True]
    assert not torch.isfinite(state.shared["conv.weight"]).all()
    assert all(0 <= r["acc"] <= 100 for r in state.history)  # a drop, recorded, no crash


def test_lr_schedules():
    t = {
        "lr": 0.1,
        "rounds": 50,
        "schedule": {"kind": "milestones", "milestones": [30], "gamma": 0.1},
    }
    assert lr_at(t, 30) == pytest.approx(0.1) and lr_at(t, 31) == pytest.approx(0.01)
    e = {"lr": 0.1, "schedule": {"kind": "exponential", "gamma": 0.998}}
    assert lr_at(e, 1) == 0.1 and lr_at(e, 11) == pytest.approx(0.1 * 0.998**10)
    c = {"lr": 1.0, "rounds": 10, "schedule": {"kind": "cosine"}}
    assert lr_at(c, 1) == 1.0 and lr_at(c, 10) < 0.05
    with pytest.raises(ValueError, match="schedule.kind"):
        lr_at({"lr": 1, "schedule": {"kind": "weird"}}, 1)


@pytest.mark.parametrize("algorithm", ["fedavg", "fedbn", "scaffold"])
def test_evaluating_only_after_the_last_round_changes_no_number(algorithm):
    """What the plan's eval_rounds: read relies on: evaluation draws from its own generators
    and leaves the model as it found it, so the last round's numbers and the trained tensors
    are those of a run evaluated every round."""
    every, _, _ = run({"name": algorithm}, train_cfg(rounds=4, eval_every=1))
    last, _, _ = run({"name": algorithm}, train_cfg(rounds=4, eval_every=4))
    assert [("acc" in r) for r in last.history] == [False, False, False, True]
    assert untimed(every.history[-1:]) == untimed(last.history[-1:])
    for k, v in every.shared.items():
        assert torch.equal(v, last.shared[k]), k
    for c, tensors in every.local.items():
        assert all(torch.equal(t, last.local[c][n]) for n, t in tensors.items())


def test_a_round_line_gives_the_training_loss_and_the_accuracy_only_where_evaluated(
    monkeypatch,
):
    """Rounds without an evaluation printed ``acc=nan`` and no round printed its training
    loss: each line now has the mean loss of the round's client steps (what each client's
    training already read, weighted by its steps), and ``acc=`` only on evaluated rounds."""
    fitted: list[list] = []
    train_epochs = engine.train_epochs

    def spy(*args, **kw):
        steps, loss = train_epochs(*args, **kw)
        fitted[-1].append((steps, loss))
        return steps, loss

    def log(message: str) -> None:
        lines.append(message)
        fitted.append([])

    lines: list[str] = []
    fitted.append([])
    monkeypatch.setattr(engine, "train_epochs", spy)
    state, _, _ = run({"name": "fedavg"}, train_cfg(rounds=4, eval_every=2), log=log)
    assert [line.split()[1] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    for line, row, clients in zip(lines, state.history, fitted, strict=False):
        mean = sum(s * loss for s, loss in clients) / sum(s for s, _ in clients)
        assert f" loss={mean:.4f} " in line, line
        assert ("acc=" in line) == ("acc" in row), line
        assert "nan" not in line, line
    assert f"acc={state.history[-1]['acc']:.2f}" in lines[-1]


def test_the_eta_counts_the_rounds_left_of_the_whole_job(tmp_path):
    """The time left was the run's: a job of several runs gave ``eta 0s`` at each run's last
    round. With the job's pace (two runs of 5 rounds, 100 s gone before this run's first
    round) the line counts all the job's rounds left, and a resumed run's done rounds are not
    counted as work done in this job."""
    lines: list[str] = []
    pace = Pace(10, start=time.monotonic() - 100)
    run({"name": "fedavg"}, train_cfg(rounds=5), log=lines.append, pace=pace)
    left = [int(re.search(r"\(job: (\d+) rounds? left\)", line)[1]) for line in lines]
    assert left == [9, 8, 7, 6, 5]
    first = re.search(r" eta (\d+)m(\d\d)s ", lines[0] + " ")
    assert 15 <= int(first[1]) < 16, lines[0]  # 100 s for 1 round, 9 to go: 15 min
    assert re.search(r"eta \d+m\d\ds \(job: 5 rounds left\)$", lines[-1]), lines[-1]
    ckpt = tmp_path / "ckpt.pt"
    run_killed_at(3, {"name": "fedavg"}, train_cfg(rounds=5), ckpt)
    lines.clear()
    pace = Pace(5)
    run({"name": "fedavg"}, train_cfg(rounds=5), checkpoint=ckpt, log=lines.append, pace=pace)
    assert lines[0] == "resumed from round 3"
    assert [line.split(" (job: ")[1] for line in lines[1:]] == ["1 round left)", "0 rounds left)"]
