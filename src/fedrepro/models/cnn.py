"""Small CNNs trained from scratch: NIID-Bench's SimpleCNN and FedICON's (FedTHE's) CNN.

Both take ``img_size`` because the flattened size after two valid 5×5 convs and 2×2 pools depends
on it (32 px → 5×5, 28 px → 4×4). Both follow timm's interface (``forward_features``,
``forward_head(pre_logits=...)``, ``get_classifier``) so the representation used by contrastive
losses is ``forward_head(forward_features(x), pre_logits=True)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FedIconCNN", "SimpleCNN"]


def _side_after_convs(img_size: int) -> int:
    """Spatial side after conv5×5 (valid) → pool2 → conv5×5 (valid) → pool2."""
    side = ((img_size - 4) // 2 - 4) // 2
    if side < 1:
        raise ValueError(f"img_size {img_size} is too small for two 5×5 convs and 2×2 pools")
    return side


class SimpleCNN(nn.Module):
    """NIID-Bench ``SimpleCNN``: conv(6) → pool → conv(16) → pool → FC 120 → FC 84 → FC C."""

    def __init__(self, num_classes: int = 10, in_chans: int = 3, img_size: int = 32) -> None:
        super().__init__()
        side = _side_after_convs(img_size)
        self.conv1 = nn.Conv2d(in_chans, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.num_features = 84
        self.num_classes = num_classes
        self.fc3 = self._classifier(num_classes)

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def get_classifier(self) -> nn.Module:
        return self.fc3

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.fc3 = self._classifier(num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return F.max_pool2d(F.relu(self.conv2(x)), 2)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = F.relu(self.fc2(F.relu(self.fc1(x.flatten(1)))))
        return x if pre_logits else self.fc3(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


class FedIconCNN(nn.Module):
    """FedTHE's ``CNNCifar`` with BN (the variant Tent/EATA need), FedICON's "simple CNN".

    conv5×5(32)+BN+ReLU+pool → conv5×5(64)+BN+ReLU+pool → FC 64 + ReLU (the 64-d representation
    used for contrastive learning) → FC C. As in FedTHE, convs have biases and FCs do not."""

    def __init__(self, num_classes: int = 10, in_chans: int = 3, img_size: int = 32) -> None:
        super().__init__()
        side = _side_after_convs(img_size)
        self.conv1 = nn.Conv2d(in_chans, 32, 5)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 5)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * side * side, 64, bias=False)
        self.num_features = 64
        self.num_classes = num_classes
        self.classifier = self._classifier(num_classes)

    def _classifier(self, num_classes: int) -> nn.Module:
        if num_classes <= 0:
            return nn.Identity()
        return nn.Linear(self.num_features, num_classes, bias=False)

    def get_classifier(self) -> nn.Module:
        return self.classifier

    def reset_classifier(self, num_classes: int) -> None:
        self.num_classes = num_classes
        self.classifier = self._classifier(num_classes)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = F.relu(self.fc1(x.flatten(1)))
        return x if pre_logits else self.classifier(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))
