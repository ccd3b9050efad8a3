"""FedICON's test phase and the test-time baselines as the paper and the authors' code run
them (issue 30, points 6–8; docs/methods/fedicon.md): the batches each phase trains and
predicts in, and the two views of Eq. 7 whatever run the adaptation starts from."""

from __future__ import annotations

from fedrepro.fl.local import EVAL_BATCH
from fedrepro.tta import adapt_method
from tests.tta.test_test_time import _adapt, trained


def test_the_classifier_is_personalised_at_the_runs_batch_then_adapted_at_its_own(tmp_path):
    """``COALA@e55ac8a`` ``train_cls`` reads the training loader (batch 32, the run's); only
    the test-time adaptation runs at the adapt block's 128."""
    run = trained(tmp_path)  # training batch 16, about 100 training images a client
    seen = []
    adapt = {"method": "fedicon_test", "classifier_epochs": 1, "tta_epochs": 1,
             "batch_size": 64}  # fmt: skip
    _adapt(tmp_path, run, adapt, seen)
    classifier = [n for r, _, n, _ in seen if r == 1]
    tta = [n for r, _, n, _ in seen if r == 2]
    assert max(classifier) == 16 and len(classifier) > 4 * 3  # several steps per client
    assert max(tta) == 2 * 64  # two views of a test batch of 64
    _adapt(tmp_path, run, {**adapt, "classifier_batch_size": 8}, seen := [])
    assert max(n for r, _, n, _ in seen if r == 1) == 8


def test_tent_and_eata_predict_in_their_adaptation_batches(tmp_path):
    """Tent normalises with each batch's statistics, so its prediction depends on the batch:
    the code's one test loader (batch 128) serves adaptation and prediction."""
    run = {"train": {"batch_size": 32, "lr": 0.01, "rounds": 100, "local_epochs": 5},
           "algorithm": {"name": "fedavg"}}  # fmt: skip
    for name in ("tent", "eata"):
        method = adapt_method({"method": name})
        cfg = method.run_config(run, {"method": name, "batch_size": 128})
        assert cfg["train"].get("eval_batch_size", EVAL_BATCH) == 128
        cfg = method.run_config(run, {"method": name})
        assert cfg["train"].get("eval_batch_size", EVAL_BATCH) == 32  # the run's
        cfg = method.run_config(run, {"method": name, "eval_batch_size": EVAL_BATCH})
        assert cfg["train"]["eval_batch_size"] == EVAL_BATCH  # the other reading, a knob
