"""FedPCE's client training (FedPCE §3.4, §4.3, §5.1): clients that took no part in the
collaborative run join afterwards and train only what their method keeps on a client, with
every global tensor frozen and nothing sent.

As an engine run: the trained run's algorithm on the partition's ``new`` cohort, the same fold,
optimiser and steps per round, ``rounds`` rounds (200 at paper scale), its own rates where
given (FedPCE: the embedding starts at 1e-2), and optionally only ``images`` training images
per new client (Fig. 4). What trains is the algorithm's local set: FedPCE
the embedding (E scalars), FedBN the norm affine, FedPer the classifier; FedAvg and FedProx
keep nothing local, so their clients are evaluated as the global model is. Each new client
starts from the run's global tensors and the first collaborative client's local ones, as the
authors' code loads ``models[0]``'s state (somcogo/fedpce@b673d68:training.py
``merge_models(is_init=True)``), except the embedding, which starts one-hot per new client.
"""

from __future__ import annotations

import copy

from fedrepro.tta.finetune import AdaptMethod


def _client_train_config(run: dict, adapt: dict) -> dict:
    cfg = copy.deepcopy(run)
    train = cfg["train"]
    train["rounds"] = int(adapt["rounds"])
    if adapt.get("param_groups") is not None:
        train["param_groups"] = adapt["param_groups"]
    train.update(fraction=1.0, replacement=False)
    cfg["cohort"] = "new"
    if adapt.get("images") is not None:
        cfg["images"] = int(adapt["images"])
    cfg["eval_every"] = int(adapt["eval_every"])
    cfg["checkpoint_every"] = int(adapt["eval_every"])
    return cfg


def _local_set(model, algorithm) -> set[str]:
    return set(algorithm.local_keys(model))


CLIENT_TRAIN = AdaptMethod(
    name="client_train",
    engine_config=_client_train_config,
    options={"rounds": 1, "param_groups": None, "eval_every": 1, "images": None},
    start="client0",
    trains=_local_set,
)
