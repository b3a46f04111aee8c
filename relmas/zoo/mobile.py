"""Mobile CNNs built from inverted residual blocks: MobileNet-V2 and EfficientNet-B0.

Both are depthwise-separable networks (1×1 expand → k×k depthwise → 1×1 project); EfficientNet adds
squeeze-and-excitation and SiLU. Layer names follow torchvision (`features.1.conv.0.0`, ...).
"""

from __future__ import annotations

import torch
from torch import nn


class ConvNormAct(nn.Sequential):
    """Convolution → batch norm → optional activation, "same" padding for odd kernels."""

    def __init__(
        self,
        inputs: int,
        outputs: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU6,
    ):
        layers: list[nn.Module] = [
            nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(outputs),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)


# MobileNet-V2 bottleneck settings (Sandler et al. 2018, Table 2): expansion t, channels c, repeats
# n, first stride s.
MOBILENET_V2_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class InvertedResidual(nn.Module):
    """MobileNet-V2 block: [1×1 expand] → 3×3 depthwise → 1×1 linear projection (+ residual)."""

    def __init__(self, inputs: int, outputs: int, stride: int, expansion: int):
        super().__init__()
        hidden = inputs * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(ConvNormAct(inputs, hidden, 1))
        layers += [
            ConvNormAct(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, outputs, 1, bias=False),
            nn.BatchNorm2d(outputs),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        return x + out if self.residual else out


class MobileNetV2(nn.Module):
    """MobileNet-V2, width 1.0: 3×3 stem, 17 inverted residual blocks, 1×1 to 1280, classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvNormAct(3, 32, 3, stride=2)]
        channels = 32
        for expansion, width, repeats, stride in MOBILENET_V2_SETTINGS:
            for index in range(repeats):
                first_stride = stride if index == 0 else 1
                layers.append(InvertedResidual(channels, width, first_stride, expansion))
                channels = width
        layers.append(ConvNormAct(channels, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class SqueezeExcitation(nn.Module):
    """Channel attention: global pool → 1×1 squeeze (SiLU) → 1×1 excite (sigmoid) → scale."""

    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.activation = nn.SiLU()
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.gate(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return x * scale


class MBConv(nn.Module):
    """EfficientNet block: [1×1 expand] → k×k depthwise → SE (¼ of input) → 1×1 project."""

    def __init__(self, inputs: int, outputs: int, kernel: int, stride: int, expansion: int):
        super().__init__()
        hidden = inputs * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(ConvNormAct(inputs, hidden, 1, activation=nn.SiLU))
        layers += [
            ConvNormAct(hidden, hidden, kernel, stride, groups=hidden, activation=nn.SiLU),
            SqueezeExcitation(hidden, max(1, inputs // 4)),
            ConvNormAct(hidden, outputs, 1, activation=None),
        ]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + out if self.residual else out


# EfficientNet-B0 stages (Tan & Le 2019, Table 1): expansion, kernel, stride, channels, repeats.
EFFICIENTNET_B0_STAGES = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


class EfficientNetB0(nn.Module):
    """EfficientNet-B0: 3×3 stem to 32, seven MBConv stages, 1×1 head to 1280, classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        stages: list[nn.Module] = [ConvNormAct(3, 32, 3, stride=2, activation=nn.SiLU)]
        channels = 32
        for expansion, kernel, stride, width, repeats in EFFICIENTNET_B0_STAGES:
            blocks = []
            for index in range(repeats):
                first_stride = stride if index == 0 else 1
                blocks.append(MBConv(channels, width, kernel, first_stride, expansion))
                channels = width
            stages.append(nn.Sequential(*blocks))
        stages.append(ConvNormAct(channels, 1280, 1, activation=nn.SiLU))
        self.features = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))
