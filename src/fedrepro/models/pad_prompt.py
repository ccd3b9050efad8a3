"""A learnable pixel frame added to every input image (Bahng et al. 2022's padding prompt; the
personal prompt of pFedPT, Li et al. TMLR 2023, FedHPL App. B.3).

The frame is ``pad`` pixels wide on each side of a ``size``×``size`` image: four tensors (top,
bottom, left, right) of ``3·(size² − (size − 2·pad)²)`` scalars in all (1,344 for 32 px and a
4-pixel frame: FedHPL Table 5's "1.3125 K"). It is added to the image; the centre is left as
it is. The wrapped model trains as before; ``prompt_keys`` names the frame's tensors.

``outside=True`` puts the frame around the image instead (FedHPL (CNN), §4.2 "padding
learnable height and width pixels as prompts to the image space"): the model sees a
``(size + 2·pad)``-pixel image whose border is the frame, ``3·((size + 2·pad)² − size²)``
scalars (8,172 for 224 px and pad 3, 1,260 for 32 px: App. Table 8). ``frozen=True`` freezes
the wrapped model but its classifier, so frame and head are what trains (FedHPL's clients).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PadPrompted", "prompt_keys"]


class PadPrompted(nn.Module):
    """``model`` that sees ``x + frame`` (``frame``: learnable, zero inside the border)."""

    def __init__(
        self,
        model: nn.Module,
        pad: int = 4,
        size: int | None = None,
        outside: bool = False,
        frozen: bool = False,
    ) -> None:
        super().__init__()
        size = int(size or _image_size(model))
        pad = int(pad)
        if not 0 < 2 * pad < size:
            raise ValueError(f"pad_prompt: pad {pad} must be ≥ 1 and leave a centre in {size} px")
        self.model = model
        self.pad, self.outside = pad, bool(outside)
        self.size = size + 2 * pad if self.outside else size  # the image the model sees
        inner = self.size - 2 * pad
        self.pad_up = nn.Parameter(torch.randn(1, 3, pad, self.size))
        self.pad_down = nn.Parameter(torch.randn(1, 3, pad, self.size))
        self.pad_left = nn.Parameter(torch.randn(1, 3, inner, pad))
        self.pad_right = nn.Parameter(torch.randn(1, 3, inner, pad))
        if frozen:
            head = {id(p) for p in model.get_classifier().parameters()}
            for p in model.parameters():
                p.requires_grad_(id(p) in head)

    def frame(self) -> torch.Tensor:
        """The prompt as one ``[1, 3, size, size]`` image, zero in the centre."""
        inner = self.size - 2 * self.pad
        centre = self.pad_left.new_zeros(1, 3, inner, inner)
        middle = torch.cat([self.pad_left, centre, self.pad_right], dim=3)
        return torch.cat([self.pad_up, middle, self.pad_down], dim=2)

    def prompted(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with the frame: added to its border, or (``outside``) around it."""
        if self.outside:
            x = nn.functional.pad(x, (self.pad,) * 4)
        return x + self.frame().to(x.dtype)

    def get_classifier(self) -> nn.Module:
        return self.model.get_classifier()

    @property
    def num_features(self) -> int:
        return self.model.num_features

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.forward_features(self.prompted(x))

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return self.model.forward_head(x, pre_logits=pre_logits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(self.prompted(x))


def _image_size(model: nn.Module) -> int:
    embed = getattr(model, "patch_embed", None)
    if embed is None or getattr(embed, "img_size", None) is None:
        raise ValueError("pad_prompt: give tuning_options.size for a model without patch_embed")
    return int(embed.img_size[0])


def prompt_keys(model: nn.Module) -> list[str]:
    """The frame's tensor names in ``model`` (a ``PadPrompted``)."""
    return [n for n, _ in model.named_parameters() if n.rsplit(".", 1)[-1].startswith("pad_")]
