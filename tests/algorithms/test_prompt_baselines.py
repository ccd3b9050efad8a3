"""FedHPL's prompt baselines (docs/methods/fedhpl.md): pFedPT keeps its pixel prompt on the
client and averages the model; pFedPG's server generator makes each client's prompts, the
clients send back only their prompt updates, and zero updates leave the generator alone."""

from __future__ import annotations

import torch
from timm.models.vision_transformer import VisionTransformer

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.engine import run_rounds
from fedrepro.models.pad_prompt import PadPrompted
from fedrepro.models.tuning import apply_tuning
from tests.fl_helpers import problem, spy_client_end, train_cfg


def _vit() -> VisionTransformer:
    return VisionTransformer(img_size=6, patch_size=3, embed_dim=8, depth=1, num_heads=2,
                             num_classes=3, mlp_ratio=2.0)  # fmt: skip


def _run(model, algorithm: dict, rounds: int = 2, spy: list | None = None):
    data, clients = problem()
    alg = make_algorithm(algorithm)
    if spy is not None:
        spy_client_end(alg, spy)
    state = run_rounds(train_cfg(rounds=rounds), model, alg, data, data, clients,
                       log=lambda _: None)  # fmt: skip
    return state, alg


def test_pad_prompt_is_a_frame_of_the_counted_size_and_zero_inside():
    torch.manual_seed(0)
    model = PadPrompted(VisionTransformer(img_size=32, patch_size=4, embed_dim=8, depth=1,
                                          num_heads=2), pad=4)  # fmt: skip
    frame = model.frame()
    assert sum(p.numel() for n, p in model.named_parameters() if n.startswith("pad_")) == 1344
    assert frame.shape == (1, 3, 32, 32) and torch.count_nonzero(frame[..., 4:28, 4:28]) == 0
    assert torch.count_nonzero(frame) == 1344


def test_pfedpt_keeps_the_prompt_local_trains_it_first_and_averages_the_model():
    torch.manual_seed(0)
    model = apply_tuning(_vit(), "pad_prompt", pad=1)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    seen: list = []
    state, alg = _run(model, {"name": "pfedpt", "prompt_epochs": 1}, spy=seen)
    prompt = {"pad_up", "pad_down", "pad_left", "pad_right"}
    assert set(alg.local) >= prompt and not prompt & set(state.shared)
    assert all(not prompt & set(p.all_tensors()) for *_, p in seen)  # never uploaded
    assert "model.head.weight" in state.shared  # the whole model is averaged
    frames = [state.local[k]["pad_up"] for k in range(4)]
    assert all(not torch.equal(frames[0], f) for f in frames[1:])  # personal prompts
    assert not torch.equal(frames[0], start["pad_up"])
    assert alg.local_phases(1, 1) == [(alg.head, 1), (set(alg.trainable) - alg.head, 1)]


def test_pfedpg_sends_each_client_its_generated_prompts_and_receives_updates():
    torch.manual_seed(0)
    model = apply_tuning(_vit(), "vpt_shallow", num_prompts=2)
    seen: list = []
    state, alg = _run(model, {"name": "pfedpg", "server_lr": 0.5}, spy=seen)
    assert state.shared == {} and {"prompts", "vit.head.weight"} <= set(alg.local)
    for r, k, got, payload in seen:
        assert set(payload.all_tensors()) == {"extra.delta"}
        assert got["prompts"].shape == (1, 1, 2, 8)
        # the client trained from what it received: its prompts now = received + delta
        if r == 2:
            assert torch.allclose(
                state.local[k]["prompts"], got["prompts"] + payload.extra["delta"]
            )
    firsts = [got["prompts"] for r, _, got, _ in seen if r == 1]
    assert not torch.equal(firsts[0], firsts[1])  # client-specific
    assert state.history[0]["up_scalars"] == 4 * 2 * 8
    assert state.history[0]["down_bytes"] == 4 * 2 * 8 * 4


def test_pfedpg_zero_updates_leave_the_generator_unchanged():
    from fedrepro.fl.algorithm import Payload

    torch.manual_seed(0)
    model = apply_tuning(_vit(), "vpt_shallow", num_prompts=2)
    alg = make_algorithm({"name": "pfedpg", "server_lr": 0.01})
    alg.setup(model, 3)
    before = {k: v.clone() for k, v in alg.generator.state_dict().items()}
    zero = [Payload(k, 1, 1, {}, {"delta": torch.zeros(1, 1, 2, 8)}) for k in range(3)]
    alg.aggregate({}, zero)
    assert all(torch.equal(before[k], v) for k, v in alg.generator.state_dict().items())
    deltas = [torch.randn(1, 1, 2, 8) for _ in range(3)]
    prompts = [alg._prompts(k).detach().clone() for k in range(3)]
    alg.aggregate({}, [Payload(k, 1, 1, {}, {"delta": d}) for k, d in enumerate(deltas)])
    # a small step moves every client's generated prompts towards its update
    for k, d in enumerate(deltas):
        assert ((alg._prompts(k).detach() - prompts[k]) * d).sum() > 0
