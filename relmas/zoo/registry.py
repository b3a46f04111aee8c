"""The built-in model zoo: each name with its options (defaults, limits) and example inputs.

A built-in model is built on whatever default device is active; `relmas.zoo.table` builds them on
`meta`, so nothing is allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from relmas.zoo.classic import VGG16, AlexNet, GoogLeNet
from relmas.zoo.mobile import EfficientNetB0, MobileNetV2
from relmas.zoo.resnet import ResNet50
from relmas.zoo.transformer import GPT2, BertEncoder, VisionTransformer
from relmas.zoo.unet import UNet

Options = Mapping[str, int]


@dataclass(frozen=True)
class BuiltinModel:
    """A built-in model: how to build it and its inputs from its (integer) options."""

    build: Callable[[Options], nn.Module]
    inputs: Callable[[Options], tuple[torch.Tensor, ...]]
    defaults: Options
    maxima: Options = field(default_factory=dict)


def _images(channels: int) -> Callable[[Options], tuple[torch.Tensor, ...]]:
    def inputs(options: Options) -> tuple[torch.Tensor, ...]:
        size = options["image_size"]
        return (torch.empty(options["batch"], channels, size, size),)

    return inputs


def _token_ids(options: Options) -> tuple[torch.Tensor, ...]:
    return (torch.zeros(options["batch"], options["seq_len"], dtype=torch.long),)


def _vision(
    build: Callable[[], nn.Module], image_size: int = 224, channels: int = 3
) -> BuiltinModel:
    return BuiltinModel(
        build=lambda _options: build(),
        inputs=_images(channels),
        defaults={"batch": 1, "image_size": image_size},
    )


def _language(build: Callable[[], nn.Module], max_positions: int) -> BuiltinModel:
    return BuiltinModel(
        build=lambda _options: build(),
        inputs=_token_ids,
        defaults={"batch": 1, "seq_len": 128},
        maxima={"seq_len": max_positions},
    )


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    "resnet50": _vision(ResNet50),
    "mobilenet_v2": _vision(MobileNetV2),
    "vgg16": _vision(VGG16),
    "googlenet": _vision(GoogLeNet),
    "efficientnet_b0": _vision(EfficientNetB0),
    "unet": _vision(UNet, image_size=572, channels=1),
    "alexnet": _vision(AlexNet, image_size=227),
    "bert_base": _language(BertEncoder, max_positions=512),
    "gpt2": _language(GPT2, max_positions=1024),
    "vit_b16": BuiltinModel(
        build=lambda options: VisionTransformer(image_size=options["image_size"]),
        inputs=_images(3),
        defaults={"batch": 1, "image_size": 224},
    ),
}
