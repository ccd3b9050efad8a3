"""VPT on timm ViTs (Jia et al. ECCV 2022; FedIns §4.5; docs/methods/fedins.md): token counts,
sizes, deep-prompt replacement."""

from __future__ import annotations

import pytest
import torch

from fedrepro.models.registry import create_backbone
from fedrepro.models.vpt import PromptedViT


def _vit(seed=0):
    torch.manual_seed(seed)
    return create_backbone("vit_tiny_mini", 10).double().eval()


def test_paper_scale_prompt_sizes():
    with torch.device("meta"):
        deep = PromptedViT(create_backbone("vit_base_patch16_224.augreg_in21k", 10), 10, True)
        shallow = PromptedViT(create_backbone("vit_base_patch16_224.augreg_in21k", 10), 10, False)
    assert deep.prompts.numel() == 10 * 12 * 768 == 92_160  # FedIns "Prompt": 0.10 M with head
    assert shallow.prompts.numel() == 10 * 768
    trainable = sum(p.numel() for p in deep.parameters() if p.requires_grad)
    assert trainable == 92_160 + 768 * 10 + 10
    assert f"{trainable / 1e6:.2f}" == "0.10"


@pytest.mark.parametrize("deep", [True, False])
def test_token_count_is_cls_plus_prompts_plus_patches(deep):
    vit = _vit()
    model = PromptedViT(vit, 5, deep).double()
    seen = []
    for block in vit.blocks:
        block.register_forward_hook(lambda m, i, o: seen.append(o.shape[1]))
    model(torch.randn(2, 3, 16, 16, dtype=torch.float64))
    patches = (16 // 4) ** 2
    assert seen == [1 + 5 + patches] * len(vit.blocks)


def test_zero_prompts_is_the_frozen_vit():
    vit = _vit()
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        plain = vit(x)
        prompted = PromptedViT(vit, 0, True).double()(x)
    assert (plain - prompted).abs().max() < 1e-12


def test_deep_prompts_replace_the_previous_blocks_prompt_outputs():
    vit = _vit()
    model = PromptedViT(vit, 4, True).double().eval()
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        ref = model(x)

        def scramble(module, inputs, output):
            output = output.clone()
            output[:, 1:5] = torch.randn_like(output[:, 1:5]) * 100
            return output

        handle = vit.blocks[0].register_forward_hook(scramble)
        deep_out = model(x)
        handle.remove()
        shallow = PromptedViT(vit, 4, False).double().eval()
        shallow_ref = shallow(x)
        handle = vit.blocks[0].register_forward_hook(scramble)
        shallow_out = shallow(x)
        handle.remove()
    assert (deep_out - ref).abs().max() < 1e-12  # block 2 never sees block 1's prompt outputs
    assert (shallow_out - shallow_ref).abs().max() > 1e-6  # shallow prompts propagate


def test_only_prompts_and_head_train():
    model = PromptedViT(_vit(), 3, True)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"prompts", "vit.head.weight", "vit.head.bias"}


def test_prompt_pool_paper_size_and_per_instance_selection():
    from fedrepro.models.tuning import apply_tuning

    with torch.device("meta"):
        vit = create_backbone("vit_base_patch16_224.augreg_in21k", 10)
        pool = apply_tuning(vit, "vpt_pool", num_prompts=10, pool_size=25, top_c=3)
    assert pool.prompts.numel() + pool.keys.numel() == 25 * (92_160 + 768) == 2_323_200  # "2.32 M"
    torch.manual_seed(0)
    model = apply_tuning(_vit(), "vpt_pool", num_prompts=3, pool_size=5, top_c=2).double().eval()
    x = torch.randn(3, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        batched = model(x)
        assert -2.0 <= float(model.reduce_sim) <= 2.0
        for b in range(3):
            assert (model(x[b : b + 1]) - batched[b : b + 1]).abs().max() < 1e-10
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"prompts", "keys", "vit.head.weight", "vit.head.bias"}
