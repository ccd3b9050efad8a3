"""Partial sharing: FedBN keeps normalisation layers local, FedPer and FedRep keep the head
local, pFedPT its input prompt."""

from __future__ import annotations

from fedrepro.fl.algorithm import Algorithm
from fedrepro.fl.tensors import named_state
from fedrepro.models.pad_prompt import prompt_keys
from fedrepro.models.registry import head_keys, norm_keys


class FedBN(Algorithm):
    """Li et al. 2021: norm affine parameters and running statistics never leave a client."""

    name = "fedbn"

    def local_keys(self, model) -> set[str]:
        return set(norm_keys(model))


class FedPer(Algorithm):
    """Arivazhagan et al. 2019: the classifier head is personal, the base is averaged."""

    name = "fedper"

    def local_keys(self, model) -> set[str]:
        return set(head_keys(model))


class FedRep(Algorithm):
    """Collins et al. 2021: the head is personal; each round a client first trains its head
    for ``head_epochs`` with the body frozen, then the body for the round's local epochs with
    the head frozen, and sends the body (docs/methods/baselines.md)."""

    name = "fedrep"

    def __init__(self, head_epochs: int = 10, **kw):
        super().__init__(**kw)
        self.head_epochs = int(head_epochs)

    def personal_keys(self, model) -> list[str]:
        """The tensors that stay on the client and train first."""
        return head_keys(model)

    def local_keys(self, model) -> set[str]:
        return set(self.personal_keys(model))

    def setup(self, model, num_clients: int) -> None:
        super().setup(model, num_clients)
        self.head = set(self.personal_keys(model)) & set(self.trainable)

    def local_phases(self, r: int, epochs: int) -> list[tuple[set[str], int]]:
        body = set(self.trainable) - self.head
        return [(self.head, self.head_epochs), (body, epochs)]


class PFedPT(FedRep):
    """pFedPT (Li et al. TMLR 2023; FedHPL App. B.3): each client keeps a personal pixel
    prompt (``tuning: pad_prompt``) and each round first trains it for ``prompt_epochs`` with
    the model frozen (stage 1), then the whole model for the round's local epochs with the
    prompt frozen (stage 2); the model is averaged, the prompt never leaves the client."""

    name = "pfedpt"

    def __init__(self, prompt_epochs: int = 1, **kw):
        super().__init__(head_epochs=prompt_epochs, **kw)

    def personal_keys(self, model) -> list[str]:
        keys = prompt_keys(model)
        if not keys:
            raise ValueError("algorithm pfedpt needs model.tuning: pad_prompt")
        return keys


class FedBABU(Algorithm):
    """Oh et al. 2022: the head stays at its (common) initialisation during federated
    training, only the body trains and is averaged; before evaluation each client fine-tunes
    its model (FedHPL App. B.3: the entire model, 10 epochs: the ``finetune`` adapt stage)."""

    name = "fedbabu"

    def setup(self, model, num_clients: int) -> None:
        """The head is neither sent nor kept per client: it stays the model's seeded
        initialisation, the same on every client and in the saved run."""
        super().setup(model, num_clients)
        self.head = set(head_keys(model)) & set(self.trainable)
        self.shared = [k for k in self.shared if k not in self.head]
        self.shared_trainable = [k for k in self.shared_trainable if k not in self.head]
        self.local = [k for k in self.local if k not in self.head]

    def local_phases(self, r: int, epochs: int) -> list[tuple[set[str], int]]:
        return [(set(self.trainable) - self.head, epochs)]


class Local(Algorithm):
    """Local / SOLO: every client trains alone for the same budget; nothing is sent."""

    name = "local"

    def local_keys(self, model) -> set[str]:
        return set(named_state(model))
