"""The classic plain CNNs: AlexNet (original two-group form), VGG-16 and GoogLeNet (Inception v1).

Each follows its paper's inference graph; normalisation, pooling and activations carry no MACs but
are kept so the traced shapes are the real ones.
"""

from __future__ import annotations

import torch
from torch import nn


class AlexNet(nn.Module):
    """Krizhevsky et al. 2012, the two-GPU model: conv2, conv4, conv5 split into 2 groups.

    The input is 227×227 (the size that gives the paper's 55×55 conv1 output without padding, as in
    Caffe's reference model); an adaptive pool before fc6 keeps other sizes usable.
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, kernel_size=11, stride=4)
        self.conv2 = nn.Conv2d(96, 256, kernel_size=5, padding=2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, kernel_size=3, padding=1)
        self.conv4 = nn.Conv2d(384, 384, kernel_size=3, padding=1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, kernel_size=3, padding=1, groups=2)
        self.norm = nn.LocalResponseNorm(size=5, alpha=1e-4, beta=0.75, k=2.0)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2)
        self.fit = nn.AdaptiveAvgPool2d((6, 6))
        self.fc6 = nn.Linear(256 * 6 * 6, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, num_classes)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.norm(self.relu(self.conv1(x))))
        x = self.pool(self.norm(self.relu(self.conv2(x))))
        x = self.relu(self.conv3(x))
        x = self.relu(self.conv4(x))
        x = self.pool(self.relu(self.conv5(x)))
        x = torch.flatten(self.fit(x), 1)
        x = self.dropout(self.relu(self.fc6(x)))
        x = self.dropout(self.relu(self.fc7(x)))
        return self.fc8(x)


VGG16_STAGES = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))


class VGG16(nn.Module):
    """Simonyan & Zisserman 2015, configuration D (13 3×3 convolutions, 3 fully connected)."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for width, repeats in VGG16_STAGES:
            for _ in range(repeats):
                layers += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.ReLU()]
                channels = width
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def _conv_relu(inputs: int, outputs: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, kernel, stride=stride, padding=kernel // 2), nn.ReLU()
    )


class Inception(nn.Module):
    """One Inception module: 1×1, 1×1→3×3, 1×1→5×5 and 3×3-maxpool→1×1 branches, concatenated."""

    def __init__(
        self, inputs: int, b1: int, b3_reduce: int, b3: int, b5_reduce: int, b5: int, pool: int
    ):
        super().__init__()
        self.branch1 = _conv_relu(inputs, b1, 1)
        self.branch2 = nn.Sequential(_conv_relu(inputs, b3_reduce, 1), _conv_relu(b3_reduce, b3, 3))
        self.branch3 = nn.Sequential(_conv_relu(inputs, b5_reduce, 1), _conv_relu(b5_reduce, b5, 5))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), _conv_relu(inputs, pool, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branches = (self.branch1, self.branch2, self.branch3, self.branch4)
        return torch.cat([branch(x) for branch in branches], dim=1)


# (input channels, #1×1, #3×3 reduce, #3×3, #5×5 reduce, #5×5, pool proj) — Szegedy et al. Table 1.
GOOGLENET_INCEPTIONS = {
    "3a": (192, 64, 96, 128, 16, 32, 32),
    "3b": (256, 128, 128, 192, 32, 96, 64),
    "4a": (480, 192, 96, 208, 16, 48, 64),
    "4b": (512, 160, 112, 224, 24, 64, 64),
    "4c": (512, 128, 128, 256, 24, 64, 64),
    "4d": (512, 112, 144, 288, 32, 64, 64),
    "4e": (528, 256, 160, 320, 32, 128, 128),
    "5a": (832, 256, 160, 320, 32, 128, 128),
    "5b": (832, 384, 192, 384, 48, 128, 128),
}


class GoogLeNet(nn.Module):
    """Szegedy et al. 2015 (Inception v1) as in its Table 1, inference graph (no auxiliary heads).

    Unlike torchvision's variant, the "5×5" branches really are 5×5 and there is no batch norm.
    """

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = _conv_relu(3, 64, 7, stride=2)
        self.pool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.norm1 = nn.LocalResponseNorm(5)
        self.conv2_reduce = _conv_relu(64, 64, 1)
        self.conv2 = _conv_relu(64, 192, 3)
        self.norm2 = nn.LocalResponseNorm(5)
        self.pool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.body: list[str] = []
        for stage in ("3", "4", "5"):
            for label, widths in GOOGLENET_INCEPTIONS.items():
                if label.startswith(stage):
                    self._append(f"inception{label}", Inception(*widths))
            if stage != "5":
                self._append(f"pool{stage}", nn.MaxPool2d(3, stride=2, ceil_mode=True))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.4)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(self.pool1(self.conv1(x)))
        x = self.pool2(self.norm2(self.conv2(self.conv2_reduce(x))))
        for name in self.body:
            x = self.get_submodule(name)(x)
        return self.fc(self.dropout(torch.flatten(self.avgpool(x), 1)))

    def _append(self, name: str, module: nn.Module) -> None:
        """Register a body module at top level, so layers are named like `inception3a.branch1`."""
        self.add_module(name, module)
        self.body.append(name)
