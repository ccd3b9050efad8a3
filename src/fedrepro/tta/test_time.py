"""Test-time methods on the ``adapt`` stage (FedICON §4.2, §5.1; docs/methods/fedicon.md).

Each starts every client from the trained run's global tensors and its own local ones
(``start: own``), keeps every tensor on its client and never sends anything, adapts on the
client's own data only, and is evaluated per client. ``shift`` (every method) puts the
clients' test sets under a test-time shift (``fedrepro.fl.build.shifted_test``).

- ``evaluate``: no adaptation; the run's clients evaluated (under the shift).
- ``tent``: entropy minimisation over the batch-norm affine parameters on the client's
  unlabelled test set, ``epochs`` passes (FedICON's code: 5 epochs, SGD lr 0.005, momentum
  0.9, weight decay 5e-4, batch 128, ``SonyResearch/COALA@e55ac8a``). Batch norm normalises
  with each batch's statistics, so the prediction depends on its batch: it predicts in
  batches of ``eval_batch_size`` (default: the adaptation batch, as the code's one test
  loader serves both; EATA alike).
- ``eata``: Tent on reliable, non-redundant samples with a Fisher anchor (EATA's defaults:
  E0 = 0.4·ln C, ε = 0.05, β = 2000, 2000 Fisher samples, here the client's training images).
- ``t3a``: no gradients; prototype classifier updated while predicting, batch by batch, so
  it predicts in batches of ``eval_batch_size`` too (default: ``batch_size``, else the run's).
- ``the``: FedTHE's test-time ensemble of its global and personal heads (a FedTHE run's);
  Adam at ``lr`` (10 × the run's rate when not given, FedTHE's setting) for ``the_steps`` steps.
- ``fedicon_test``: FedICON's personalised classifier, then its contrastive test-time
  adaptation (``tta_epochs: 0`` leaves it out; ``online: true`` adapts sample by sample
  while predicting, against a memory of ``memory`` training images, §4.2) on two views
  perturbed by ``views`` (``fedrepro.data.transforms.views``; None: the run's ``train.views``), so a
  run trained without augmentation (Local, FedAvg: Table 5's TTA variants) gets two
  different views too.
"""

from __future__ import annotations

from fedrepro.tta.finetune import AdaptMethod, local_engine_config

EATA_OPTIONS = {"e_margin": 0.4, "d_margin": 0.05, "fisher_alpha": 2000.0, "fisher_size": 2000}
_COMMON = {
    "lr": None,
    "batch_size": None,
    "momentum": None,
    "weight_decay": None,
    "eval_every": None,  # evaluated once, after adapting
    "shift": None,
}


def _evaluate_config(run: dict, adapt: dict) -> dict:
    return local_engine_config(run, adapt, {"name": "local"}, 1)


def _predicting_in_adaptation_batches(cfg: dict, adapt: dict) -> dict:
    """Prediction in batches of ``eval_batch_size``, by default the adaptation batch (Tent
    and EATA normalise with each batch's statistics, T3A's prototypes grow with each
    predicted batch: the batch is part of the method)."""
    train = cfg["train"]
    train["eval_batch_size"] = int(adapt["eval_batch_size"] or train["batch_size"])
    return cfg


def _tent_config(run: dict, adapt: dict) -> dict:
    cfg = local_engine_config(run, adapt, {"name": "tent"}, adapt["epochs"])
    return _predicting_in_adaptation_batches(cfg, adapt)


def _eata_config(run: dict, adapt: dict) -> dict:
    algorithm = {"name": "eata", **{k: adapt[k] for k in EATA_OPTIONS}}
    cfg = local_engine_config(run, adapt, algorithm, adapt["epochs"])
    return _predicting_in_adaptation_batches(cfg, adapt)


def _t3a_config(run: dict, adapt: dict) -> dict:
    cfg = local_engine_config(run, adapt, {"name": "t3a", "filter_k": adapt["filter_k"]}, 1)
    return _predicting_in_adaptation_batches(cfg, adapt)


def _the_config(run: dict, adapt: dict) -> dict:
    lr = adapt["the_lr"] if adapt["the_lr"] is not None else 10 * float(run["train"]["lr"])
    algorithm = {"name": "fedthe_test", "lr": lr, "steps": adapt["the_steps"]}
    return local_engine_config(run, adapt, algorithm, 1)


def _fedicon_test_config(run: dict, adapt: dict) -> dict:
    algorithm = {
        "name": "fedicon_test",
        "classifier_epochs": adapt["classifier_epochs"],
        # the classifier epochs at the run's training batch (the code's train_cls reads the
        # training loader, batch 32); the adaptation at the adapt block's
        "classifier_batch_size": adapt["classifier_batch_size"] or run["train"]["batch_size"],
        "temperature": adapt["temperature"],
    }
    if adapt["online"]:  # adapts while predicting, after the classifier epochs
        if int(adapt["tta_epochs"]) or int(adapt["classifier_epochs"]) < 1:
            raise ValueError("adapt (fedicon_test): online needs tta_epochs: 0 and "
                             "classifier_epochs >= 1")  # fmt: skip
        algorithm.update(online=True, memory=adapt["memory"], online_steps=adapt["online_steps"])
    rounds = int(adapt["classifier_epochs"]) + int(adapt["tta_epochs"])
    cfg = local_engine_config(run, adapt, algorithm, rounds)
    if adapt["views"] is not None:  # Eq. 7's own views, whatever the run trained with
        cfg["train"]["views"] = adapt["views"]
    return cfg


def _nothing(model, algorithm) -> set[str]:
    return set()


def _batch_norm_affine(model, algorithm) -> set[str]:
    # imported here: the methods' engine configs are read where torch is not imported (the
    # workflow plans each adaptation job's runtime from them, fedrepro.cost.work)
    from fedrepro.algorithms.test_time import batch_norm_affine

    return batch_norm_affine(model)


EVALUATE = AdaptMethod("evaluate", _evaluate_config, dict(_COMMON), "own", _nothing)
_BATCH_STATISTICS = {**_COMMON, "epochs": 1, "eval_batch_size": None}
TENT = AdaptMethod("tent", _tent_config, _BATCH_STATISTICS, "own", _batch_norm_affine)
EATA = AdaptMethod(
    "eata", _eata_config, {**_BATCH_STATISTICS, **EATA_OPTIONS}, "own", _batch_norm_affine
)
T3A = AdaptMethod(
    "t3a", _t3a_config, {**_COMMON, "eval_batch_size": None, "filter_k": 50}, "own", _nothing
)
THE = AdaptMethod("the", _the_config, {**_COMMON, "the_lr": None, "the_steps": 20}, "own", _nothing)
FEDICON_TEST = AdaptMethod(
    "fedicon_test",
    _fedicon_test_config,
    {
        **_COMMON,
        "classifier_epochs": 5,
        "classifier_batch_size": None,  # the run's training batch
        "tta_epochs": 5,
        "temperature": 0.1,
        "views": None,  # the run's train.views
        "online": False,
        "memory": 256,
        "online_steps": 1,
    },
    "own",
)
