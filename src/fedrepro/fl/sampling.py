"""Which clients take part in a round, and the seeds every random draw derives from."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from (run seed, round, client, ...): resumable and order-free."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint64)[0] >> 1)


def seeded_generator(*parts: int) -> torch.Generator:
    """A CPU generator seeded by ``derive_seed(*parts)`` (a client's draws in a round)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(derive_seed(*parts))
    return gen


def sample_clients(
    num_clients: int, fraction: float, round_idx: int, seed: int, replacement: bool = False
) -> list[int]:
    """All clients when fraction ≥ 1, else round(fraction·K) drawn for this round."""
    if fraction >= 1.0:
        return list(range(num_clients))
    m = max(1, int(round(fraction * num_clients)))
    rng = np.random.default_rng(derive_seed(seed, round_idx, 0xC11E))
    picked = rng.choice(num_clients, size=m, replace=replacement)
    return [int(k) for k in (picked if replacement else np.sort(picked))]
