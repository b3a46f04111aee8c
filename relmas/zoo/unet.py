"""U-Net as in Ronneberger et al. 2015 (the original, unpadded form).

Every 3×3 convolution is "valid" (no padding), so each level loses a border; the expanding path
up-samples with a 2×2 stride-2 transposed convolution ("up-convolution"), concatenates the centre
crop of the matching contracting feature map and applies two more valid 3×3 convolutions. With the
paper's 572×572 single-channel input the output segmentation map is 388×388 with 2 classes. Any
input size whose feature maps stay positive works; sizes with 572 ≡ size (mod 16) keep every pooling
exact.
"""

from __future__ import annotations

import torch
from torch import nn

UNET_WIDTHS = (64, 128, 256, 512, 1024)


class DoubleConv(nn.Sequential):
    """Two valid 3×3 convolutions, each followed by a ReLU."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__(
            nn.Conv2d(inputs, outputs, 3),
            nn.ReLU(),
            nn.Conv2d(outputs, outputs, 3),
            nn.ReLU(),
        )


def center_crop(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """The central rows × cols window of a feature map (the paper's "cropping")."""
    top = (x.shape[-2] - rows) // 2
    left = (x.shape[-1] - cols) // 2
    return x[..., top : top + rows, left : left + cols]


class UpBlock(nn.Module):
    """2×2 up-convolution halving the channels, crop-and-concatenate the skip, DoubleConv."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(inputs, outputs, kernel_size=2, stride=2)
        self.conv = DoubleConv(inputs, outputs)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = self.up(x)
        skip = center_crop(skip, x.shape[-2], x.shape[-1])
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    """Contracting path of 4 DoubleConv + max-pool levels, a 1024-channel bottom, expanding path."""

    def __init__(self, in_channels: int = 1, num_classes: int = 2):
        super().__init__()
        down_widths = UNET_WIDTHS[:-1]
        inputs = (in_channels, *down_widths[:-1])
        self.down = nn.ModuleList(
            DoubleConv(i, o) for i, o in zip(inputs, down_widths, strict=True)
        )
        self.pool = nn.MaxPool2d(2)
        self.bottom = DoubleConv(UNET_WIDTHS[-2], UNET_WIDTHS[-1])
        ups = reversed(list(zip(UNET_WIDTHS[1:], UNET_WIDTHS[:-1], strict=True)))
        self.up = nn.ModuleList(UpBlock(i, o) for i, o in ups)
        self.head = nn.Conv2d(UNET_WIDTHS[0], num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for block, skip in zip(self.up, reversed(skips), strict=True):
            x = block(x, skip)
        return self.head(x)
