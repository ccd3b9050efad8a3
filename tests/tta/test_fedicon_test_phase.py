"""FedICON's test phase and the test-time baselines as the paper and the authors' code run
them (issue 30, points 6–8; docs/methods/fedicon.md): the batches each phase trains and
predicts in, and the two views of Eq. 7 whatever run the adaptation starts from."""

from __future__ import annotations

import pytest
import torch

from fedrepro.algorithms.test_time import T3APredictor
from fedrepro.fl.eval_batch import EVAL_BATCH
from fedrepro.jobs.adapt import prepare_adapt
from fedrepro.tta import adapt_method
from tests.job_helpers import VIEWS
from tests.tta.test_test_time import _adapt, trained


def _tta_batches(tmp, run, adapt) -> list[torch.Tensor]:
    job, _ = prepare_adapt(adapt, run, tmp / "data", tmp / "part.json", device="cpu")
    batches, inner = [], job.algorithm.objective

    def objective(ctx, x, y):
        if job.algorithm.adapting(ctx.round):
            batches.append(x.detach().clone())
        return inner(ctx, x, y)

    job.algorithm.objective = objective
    job.run(None, log=lambda _: None)
    return batches


def test_eq7_views_differ_when_adapting_a_run_trained_without_augmentation(tmp_path):
    """Eq. 7 pairs each test image with "the augmented sample of x": Table 5's TTA and
    GIS+TTA adapt Local and FedAvg runs, which train without augmentation; the adaptation
    brings its own views, so the two views of every image differ."""
    run = trained(tmp_path)  # FedAvg without augmentation
    adapt = {"method": "fedicon_test", "classifier_epochs": 0, "tta_epochs": 1, "views": VIEWS}
    batches = _tta_batches(tmp_path, run, adapt)
    assert batches
    for x in batches:
        b = len(x) // 2
        assert all(not torch.equal(x[i], x[b + i]) for i in range(b))
    with pytest.raises(ValueError, match="two views would be the same image.*adapt.views"):
        _tta_batches(tmp_path, run, {**adapt, "views": None})


def test_the_classifier_is_personalised_at_the_runs_batch_then_adapted_at_its_own(tmp_path):
    """``COALA@e55ac8a`` ``train_cls`` reads the training loader (batch 32, the run's); only
    the test-time adaptation runs at the adapt block's 128."""
    run = trained(tmp_path)  # training batch 16, about 100 training images a client
    seen = []
    adapt = {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": 1,
             "batch_size": 64, "views": VIEWS}  # fmt: skip
    _adapt(tmp_path, run, adapt, seen)
    classifier = [n for r, _, n, _ in seen if r == 1]
    tta = [n for r, _, n, _ in seen if r == 2]
    assert max(classifier) == 16 and len(classifier) > 4 * 3  # several steps per client
    assert max(tta) == 2 * 64  # two views of a test batch of 64
    _adapt(tmp_path, run, {**adapt, "classifier_batch_size": 8}, seen := [])
    assert max(n for r, _, n, _ in seen if r == 1) == 8


def test_tent_eata_and_t3a_predict_in_their_adaptation_batches(tmp_path):
    """Tent normalises with each batch's statistics, so its prediction depends on the batch:
    the code's one test loader (batch 128) serves adaptation and prediction. T3A's
    prototypes grow with each predicted batch: the same default."""
    run = {"train": {"batch_size": 32, "lr": 0.01, "rounds": 100, "local_epochs": 5},
           "algorithm": {"name": "fedavg"}}  # fmt: skip
    for name in ("tent", "eata", "t3a"):
        method = adapt_method({"method": name})
        cfg = method.run_config(run, {"method": name, "batch_size": 128})
        assert cfg["train"].get("eval_batch_size", EVAL_BATCH) == 128
        cfg = method.run_config(run, {"method": name})
        assert cfg["train"].get("eval_batch_size", EVAL_BATCH) == 32  # the run's
        cfg = method.run_config(run, {"method": name, "eval_batch_size": EVAL_BATCH})
        assert cfg["train"]["eval_batch_size"] == EVAL_BATCH  # the other reading, a knob


def test_t3a_grows_its_prototypes_batch_by_batch_in_its_adaptation_batches(tmp_path, monkeypatch):
    """T3A adds each predicted batch's representations to its supports, so the batch is part
    of its prediction: it predicts in the adapt block's batches, as Tent does."""
    sizes, forward = [], T3APredictor.forward

    def spy(self, x):
        sizes.append(len(x))
        return forward(self, x)

    monkeypatch.setattr(T3APredictor, "forward", spy)
    _adapt(tmp_path, trained(tmp_path), {"method": "t3a", "batch_size": 4})
    assert max(sizes) == 4 and len(sizes) > 4  # every client's test set in batches of 4


def test_views_that_perturb_nothing_are_refused(tmp_path):
    """A views block whose every perturbation is off (a flip drawn with probability 0)
    would give Eq. 7 the same image twice: refused in one line naming the key."""
    run = trained(tmp_path)
    adapt = {"method": "fedicon_test", "classifier_epochs": 0, "tta_epochs": 1}
    for views in ({"flip": 0}, {"grayscale": 0.0, "jitter": {"p": 0.8}}):
        with pytest.raises(ValueError, match=r"^[^\n]*views \{.*\} perturb nothing.*adapt\.views"):
            _tta_batches(tmp_path, run, {**adapt, "views": views})
    assert _tta_batches(tmp_path, run, {**adapt, "views": {"flip": 0.5}})  # one is enough
