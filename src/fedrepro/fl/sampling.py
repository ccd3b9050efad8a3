"""Which clients take part in a round, and the seeds every random draw derives from."""

from __future__ import annotations

import numpy as np
import torch


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from (run seed, round, client, ...): resumable and order-free."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint64)[0] >> 1)


def seeded_generator(*parts: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on ``device`` seeded by ``derive_seed(*parts)`` (a client's draws in a
    round). A job's generators live on the job's device and every draw from one happens there
    (``device=generator.device``), so a GPU step neither copies its draws nor hands a CUDA
    kernel a CPU generator; on the CPU the numbers are those of a CPU generator, as always.
    CUDA's Philox stream differs from the CPU's: a GPU run draws other (equally seeded,
    equally reproducible) numbers than a CPU run."""
    gen = torch.Generator(device=device)
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
