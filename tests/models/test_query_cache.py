"""The frozen query computed once per image equals the uncached path (models.query_cache)."""

from __future__ import annotations

import copy

import pytest
import torch

from fedrepro.algorithms import make_algorithm
from fedrepro.fl.data import DeviceData
from fedrepro.fl.engine import Clients, run_rounds
from fedrepro.fl.local import predict
from fedrepro.models.registry import create_backbone
from fedrepro.models.tuning import apply_tuning
from tests.fl_helpers import train_cfg, untimed


def _model(tuning: str):
    torch.manual_seed(0)
    vit = create_backbone("vit_tiny_mini", 4)
    options = {"pool_size": 5, "top_c": 2}
    if tuning == "vpt_pool":
        options["num_prompts"] = 2
    return apply_tuning(vit, tuning, **options)


def _data(n=48, **settings):
    gen = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 4, (n,), generator=gen)
    images = (torch.rand(n, 16, 16, 3, generator=gen) * 255).to(torch.uint8)
    return DeviceData(images, labels, img_size=16, **settings)


def _run(model, data, cache: bool):
    cfg = train_cfg(rounds=3, momentum=0.0, weight_decay=0.0, batch_size=8)
    cfg["train"]["cache_query"] = cache
    idx = [torch.arange(0, 24), torch.arange(24, 48)]
    clients = Clients(idx, [torch.arange(48)] * 2, [None, None])
    state = run_rounds(cfg, model, make_algorithm({"name": "fedins"}), data, data, clients,
                       log=lambda _: None)  # fmt: skip
    return state, model.query_cache.computed


@pytest.mark.parametrize("tuning", ["ssf_pool", "vpt_pool"])
def test_cached_queries_give_the_uncached_run_to_the_bit(tuning):
    """Training without augmentation and evaluation: the same history and tensors, with each
    image's query computed once instead of once per forward."""
    model = _model(tuning)
    plain, plain_rows = _run(copy.deepcopy(model), _data(), cache=False)
    cached, cached_rows = _run(model, _data(), cache=True)
    assert untimed(plain.history) == untimed(cached.history)
    for k, v in plain.shared.items():
        assert torch.equal(v, cached.shared[k]), k
    assert cached_rows == 48  # each of the 48 images once (train and test are one split here)
    assert plain_rows == 3 * (48 + 48)  # every round: 48 training and 48 test forwards


def test_augmented_training_computes_every_query_and_evaluation_caches():
    model = _model("ssf_pool")
    data = _data(flip=True)
    _, rows = _run(model, data, cache=True)
    # 3 rounds x 48 augmented training images, then the 48 test images once
    assert rows == 3 * 48 + 48


def test_a_batch_is_cached_only_where_the_engine_names_it():
    model = _model("ssf_pool")
    data = _data()
    idx = torch.arange(20)
    first = predict(model, data, idx, batch_size=8)
    computed = model.query_cache.computed
    again = predict(model, data, idx, batch_size=8)
    assert model.query_cache.computed == computed == 20  # the second pass looks all 20 up
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    predict(model, data, idx, batch_size=8, transform=lambda x, g: x)  # a client transform
    assert model.query_cache.computed == 40
    predict(model, data, idx, batch_size=8, cache_query=False)
    assert model.query_cache.computed == 60
    assert copy.deepcopy(model).query_cache.tables == {}  # a copied model starts empty
