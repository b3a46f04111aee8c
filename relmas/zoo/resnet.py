"""ResNet-50 (He et al. 2016), the "v1.5" form used by torchvision and MLPerf.

v1.5 puts the stride-2 of a down-sampling bottleneck on its 3×3 convolution rather than on the first
1×1 (4.09 GMACs instead of v1's 3.86); layer names follow torchvision (`layer1.0.conv1`, ...).
"""

from __future__ import annotations

import torch
from torch import nn

RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # width, blocks, stride


class Bottleneck(nn.Module):
    """1×1 reduce → 3×3 (strided) → 1×1 expand ×4, plus a projection shortcut when shapes change."""

    expansion = 4

    def __init__(self, inputs: int, width: int, stride: int):
        super().__init__()
        outputs = width * self.expansion
        self.conv1 = nn.Conv2d(inputs, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, outputs, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(outputs)
        self.relu = nn.ReLU()
        self.downsample = (
            nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False), nn.BatchNorm2d(outputs)
            )
            if stride != 1 or inputs != outputs
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class ResNet50(nn.Module):
    """7×7 stem, four bottleneck stages of 3/4/6/3 blocks, global pool, 1000-way classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = 64
        stages = []
        for width, blocks, stride in RESNET50_STAGES:
            stage = []
            for index in range(blocks):
                stage.append(Bottleneck(channels, width, stride if index == 0 else 1))
                channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
