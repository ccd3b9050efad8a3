"""FedHPL (docs/methods/fedhpl.md) in the engine: nothing is averaged, the server's work is
the logit exchange, λ = 0 is local training, both uploads give the same global logits, only
correctly classified samples are uploaded, and the run's bytes are what is exchanged."""

from __future__ import annotations

import contextlib

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl import logits as lx
from fedrepro.fl.engine import run_rounds
from tests.fl_helpers import TinyNet, problem, spy_client_end, train_cfg

C = 3


def _run(algorithm: dict, rounds: int = 3):
    data, clients = problem()
    torch.manual_seed(0)
    model = TinyNet(C)
    alg = make_algorithm(algorithm)
    seen = []
    spy_client_end(alg, seen)
    state = run_rounds(train_cfg(rounds=rounds), model, alg, data, data, clients,
                       log=lambda _: None)  # fmt: skip
    return state, alg, seen, (data, clients)


def test_lambda_zero_is_local_training():
    hpl, *_ = _run({"name": "fedhpl", "lam": 0.0})
    local, *_ = _run({"name": "local"})
    assert hpl.shared == {} and local.shared == {}
    for k in range(4):
        for name, value in local.local[k].items():
            assert torch.equal(hpl.local[k][name], value), (k, name)
    assert [r["acc"] for r in hpl.history] == [r["acc"] for r in local.history]


def test_distillation_starts_in_round_two_and_changes_training():
    state, alg, seen, _ = _run({"name": "fedhpl", "lam": 1.0})
    assert all(not got for r, _, got, _ in seen if r == 1)  # no teacher in round 1
    assert all(got["logits"].shape == (C, C) for r, _, got, _ in seen if r > 1)
    local, *_ = _run({"name": "local"})
    assert any(not torch.equal(state.local[0][n], v) for n, v in local.local[0].items())


def test_only_correct_training_samples_are_uploaded_and_the_bytes_are_counted():
    state, alg, seen, (data, clients) = _run({"name": "fedhpl", "upload": "all"}, rounds=2)
    for _r, k, _, payload in seen:
        labels = payload.extra["labels"]
        assert payload.tensors == {} and len(labels) <= len(clients.train[k])
    row1, row2 = state.history
    kept = [len(p.extra["labels"]) for r, _, _, p in seen if r == 1]
    assert row1["up_bytes"] == sum(n * (C * 4 + 8) for n in kept)  # C float32 + an int64 label
    assert row1["down_bytes"] == 0 and row2["down_bytes"] == 4 * C * C * 4
    avg, *_ = _run({"name": "fedhpl", "upload": "average"}, rounds=2)
    assert avg.history[0]["up_bytes"] == 4 * (C * C + C) * 4  # lx.upload_scalars("average")
    assert lx.upload_scalars("average", 0, C) == C * C + C


def test_fedhpl_uploads_every_correct_logit_by_default_and_tau_squared_is_a_knob():
    """FedHPL's own rows upload all correct logits (App. C.2, Table 9's FedHPL; FedHPL+ is
    average-upload); without the τ² factor training differs (the knob reaches the loss)."""
    _, alg, seen, _ = _run({"name": "fedhpl"}, rounds=2)
    assert alg.upload == "all" and alg.tau_squared
    assert all(set(p.extra) == {"logits", "labels"} for *_, p in seen)
    plain, *_ = _run({"name": "fedhpl", "tau_squared": False}, rounds=2)
    state, *_ = _run({"name": "fedhpl"}, rounds=2)
    assert any(not torch.equal(plain.local[0][n], v) for n, v in state.local[0].items())


def test_average_and_all_upload_give_the_same_global_logits():
    _, all_alg, all_seen, _ = _run({"name": "fedhpl", "upload": "all"}, rounds=2)
    _, avg_alg, avg_seen, _ = _run({"name": "fedhpl", "upload": "average"}, rounds=2)
    first = [got["logits"] for r, _, got, _ in all_seen if r == 2]
    second = [got["logits"] for r, _, got, _ in avg_seen if r == 2]
    for a, b in zip(first, second, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(all_alg.global_logits, avg_alg.global_logits, atol=1e-4)


def test_a_killed_run_resumes_the_exchange_from_its_checkpoint(tmp_path):
    full, *_ = _run({"name": "fedhpl"}, rounds=3)
    data, clients = problem()
    torch.manual_seed(0)
    alg = make_algorithm({"name": "fedhpl"})
    cfg = train_cfg(rounds=3, checkpoint_every=1)

    class Stop(Exception):
        pass

    def stop(msg):
        if msg.startswith("round 2/"):
            raise Stop

    with contextlib.suppress(Stop):
        run_rounds(cfg, TinyNet(C), alg, data, data, clients, tmp_path / "ck.pt", log=stop)
    torch.manual_seed(0)
    resumed = run_rounds(cfg, TinyNet(C), make_algorithm({"name": "fedhpl"}), data, data,
                         clients, tmp_path / "ck.pt", log=lambda _: None)  # fmt: skip
    for k in range(4):
        for name, value in full.local[k].items():
            assert torch.equal(resumed.local[k][name], value), (k, name)


def test_averaging_the_head_shares_it_and_keeps_the_logit_exchange():
    """Table 3 right's "+ head": the heads are averaged as FedAvg would, everything else stays
    on the client, and the logits are still exchanged (and counted)."""
    state, alg, seen, _ = _run({"name": "fedhpl", "average": ["head"]}, rounds=2)
    assert set(state.shared) == {"fc.weight", "fc.bias"} and "fc.weight" not in alg.local
    assert all("fc.weight" in p.tensors for *_, p in seen)
    assert all(set(got) == {"fc.weight", "fc.bias", "logits"} for r, _, got, _ in seen if r == 2)
    head = sum(v.numel() * 4 for v in state.shared.values())
    assert state.history[1]["down_bytes"] == 4 * (head + C * C * 4)
    assert not torch.equal(state.local[0]["conv.weight"], state.local[1]["conv.weight"])


def test_averaging_needs_clients_of_one_dimension():
    alg = make_algorithm({"name": "fedhpl", "average": ["prompts"], "dims": [8, 16]})
    with pytest.raises(ValueError, match="one latent dimension"):
        alg.setup(TinyNet(C), 2)
