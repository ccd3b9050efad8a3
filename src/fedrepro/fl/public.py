"""The schedule of an algorithm that learns from a public data set (FedMD), without torch: its
defaults, and the public samples a run trains on and forwards (what the cost model prices
beside the clients' own; ``fedrepro.cost.work``)."""

from __future__ import annotations

# FedMD (fedrepro.algorithms.fedmd): public samples a round (FedMD's N_alignment), passes of
# transfer learning over the whole public set (FedHPL App. B.3: 50), digest passes a round
FEDMD_SCHEDULE = {"samples": 5000, "pretrain_epochs": 50, "digest_epochs": 1}
PUBLIC_ALGORITHMS = {"fedmd": FEDMD_SCHEDULE}


def public_dataset(run: dict) -> str | None:
    """The dataset whose training split is a run's public data (``public.dataset``), if any."""
    return (run.get("public") or {}).get("dataset")


def public_samples(
    algorithm: dict,
    public_train: int,
    clients: int,
    rounds: int,
    fraction: float = 1.0,
    step_samples: int | None = None,
) -> tuple[float, float]:
    """(trained, forwarded) public samples of a run of ``algorithm`` (its config block) over
    ``rounds``: each client's transfer learning once (every pass over ``public_train``
    images), and per client and round a digest of the round's samples (trained) and its
    logits on the next round's (forwarded); (0, 0) for an algorithm without public data, or
    a run without a public set (``public_train`` 0).
    ``step_samples`` (``train.local_steps`` × batch, where the run sets a step budget: the
    smoke's) is what each training phase then takes instead of its passes."""
    schedule = PUBLIC_ALGORITHMS.get(algorithm["name"])
    if schedule is None or not public_train:
        return 0.0, 0.0
    s = {**schedule, **{k: algorithm[k] for k in schedule if k in algorithm}}
    per_round = min(int(s["samples"]), int(public_train))
    updates = rounds * fraction * clients  # client rounds
    transfer = int(s["pretrain_epochs"]) * public_train
    digest = int(s["digest_epochs"]) * per_round
    if step_samples is not None:
        transfer = digest = step_samples
    return float(clients * transfer + updates * digest), float(updates * per_round)
