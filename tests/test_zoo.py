"""The model zoo and its layer tables: published MAC and parameter counts, conventions, errors.

Published references used below:

- torchvision model metadata (`_ops` GFLOPS, which torchvision counts as multiply-accumulates of
  convolutions and linear layers, and `num_params`), `torchvision/models/*.py`: ResNet-50 4.089 /
  25,557,032; MobileNet-V2 0.301 / 3,504,872; VGG-16 15.47 / 138,357,544; EfficientNet-B0 0.386 /
  5,288,548; ViT-B/16 17.564 / 86,567,656. Our models share those architectures exactly.
- AlexNet, original two-group form: 724M MACs (666M conv + 58.6M FC), 61M parameters — Sze, Chen,
  Yang, Emer, "Efficient Processing of Deep Neural Networks: A Tutorial and Survey", Proc. IEEE
  2017, Table III; 60,965,224 parameters is the exact count of Caffe's bvlc_alexnet.
- GoogLeNet: Szegedy et al., "Going deeper with convolutions", CVPR 2015, Table 1 ("ops" column,
  multiply-adds, in M; its rows sum to 1586M). Its 5a row (54M) disagrees with the same table's
  widths, which give 51.1M; every other row matches within the table's 1M precision.
- BERT-base: 108,891,648 parameters = Hugging Face bert-base-uncased's 109,482,240 minus its pooler
  (768 × 768 + 768). GPT-2 small: 124,439,808 (Hugging Face `gpt2`, tied LM head).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from relmas.errors import InputError
from relmas.io import read_parquet, write_parquet
from relmas.schemas import LAYER_OPS, LAYER_SCHEMA, LayerTable
from relmas.zoo import BUILTIN_MODELS, build_model, extract_layers, layer_table, model_summary

USER_MODELS = "zoo_user_models"


@pytest.fixture(scope="module")
def zoo() -> pl.DataFrame:
    return layer_table({name: {} for name in BUILTIN_MODELS})


@pytest.fixture
def user_models(monkeypatch: pytest.MonkeyPatch) -> str:
    """Make tests/zoo_user_models.py importable by its dotted path, as a user's package would be."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return USER_MODELS


def model_rows(zoo: pl.DataFrame, model: str) -> pl.DataFrame:
    return zoo.filter(pl.col("model") == model)


def row(table: pl.DataFrame, name: str) -> dict:
    rows = table.filter(pl.col("name") == name).to_dicts()
    assert len(rows) == 1, f"{name}: {len(rows)} rows"
    return rows[0]


# ------------------------------------------------------------------------------------------------
# Published totals


@pytest.mark.parametrize(
    ("model", "published_macs"),
    [
        ("resnet50", 4.089e9),
        ("mobilenet_v2", 0.301e9),
        ("vgg16", 15.47e9),
        ("efficientnet_b0", 0.386e9),
        ("vit_b16", 17.564e9),
        ("alexnet", 724e6),
        ("googlenet", 1586e6),
    ],
)
def test_macs_match_published(zoo: pl.DataFrame, model: str, published_macs: float) -> None:
    total = model_rows(zoo, model)["macs"].sum()
    assert total == pytest.approx(published_macs, rel=0.01)


@pytest.mark.parametrize(
    ("model", "published_params"),
    [
        ("resnet50", 25_557_032),
        ("mobilenet_v2", 3_504_872),
        ("vgg16", 138_357_544),
        ("efficientnet_b0", 5_288_548),
        ("vit_b16", 86_567_656),
        ("alexnet", 60_965_224),
        ("bert_base", 108_891_648),
        ("gpt2", 124_439_808),
    ],
)
def test_parameter_counts_match_reference(model: str, published_params: int) -> None:
    module, _ = build_model(model, {})
    assert sum(p.numel() for p in module.parameters()) == published_params


GOOGLENET_TABLE1_MMACS = {
    "conv1": 118,
    "conv2": 360,  # the table's "convolution 3×3" row includes its 1×1 reduction
    "inception3a": 128,
    "inception3b": 304,
    "inception4a": 73,
    "inception4b": 88,
    "inception4c": 100,
    "inception4d": 119,
    "inception4e": 170,
    "inception5b": 71,
    "fc": 1,
}


def test_googlenet_blocks_match_paper_table(zoo: pl.DataFrame) -> None:
    blocks = (
        model_rows(zoo, "googlenet")
        .with_columns(
            pl.col("name").str.split(".").list.first().str.replace("conv2_reduce", "conv2")
        )
        .group_by("name")
        .agg(pl.col("macs").sum())
    )
    measured = dict(blocks.iter_rows())
    for block, mmacs in GOOGLENET_TABLE1_MMACS.items():
        assert measured[block] / 1e6 == pytest.approx(mmacs, abs=1.0), block


# ------------------------------------------------------------------------------------------------
# Transformers: closed forms


def encoder_macs(layers: int, d: int, ff: int, s: int) -> int:
    """Q, K, V, output projections + Q·Kᵀ + attention·V + two MLP linears, per layer."""
    return layers * (4 * s * d * d + 2 * s * s * d + 2 * s * d * ff)


@pytest.mark.parametrize(("batch", "seq_len"), [(1, 128), (2, 50)])
def test_bert_base_macs_closed_form(batch: int, seq_len: int) -> None:
    table = layer_table({"bert": {"model": "bert_base", "batch": batch, "seq_len": seq_len}})
    assert table["macs"].sum() == batch * encoder_macs(12, 768, 3072, seq_len)


@pytest.mark.parametrize("seq_len", [128, 1024])
def test_gpt2_macs_closed_form_with_last_token_lm_head(seq_len: int) -> None:
    table = layer_table({"gpt2": {"seq_len": seq_len}})
    lm_head = 768 * 50257
    assert table["macs"].sum() == encoder_macs(12, 768, 3072, seq_len) + lm_head
    assert row(table, "lm_head")["Y"] == 1


def test_vit_b16_macs_closed_form(zoo: pl.DataFrame) -> None:
    patches = 14 * 14
    patch_embedding = patches * 768 * 3 * 16 * 16
    head = 768 * 1000
    expected = patch_embedding + encoder_macs(12, 768, 3072, patches + 1) + head
    assert model_rows(zoo, "vit_b16")["macs"].sum() == expected


@pytest.mark.parametrize(("model", "blocks"), [("bert_base", 12), ("gpt2", 12), ("vit_b16", 12)])
def test_attention_matmuls_per_block_with_heads_as_groups(model: str, blocks: int) -> None:
    table = layer_table({model: {"batch": 2}})
    matmuls = table.filter(pl.col("op") == "matmul")
    assert matmuls.height == 2 * blocks
    assert matmuls["name"].str.ends_with(".attn.qk").sum() == blocks
    assert matmuls["name"].str.ends_with(".attn.av").sum() == blocks
    assert (matmuls["groups"] == 2 * 12).all()
    tokens = 197 if model == "vit_b16" else 128
    qk, av = matmuls.row(0, named=True), matmuls.row(1, named=True)
    assert (qk["Y"], qk["C"], qk["K"]) == (tokens, 64, tokens)
    assert (av["Y"], av["C"], av["K"]) == (tokens, tokens, 64)


# ------------------------------------------------------------------------------------------------
# Table invariants and field conventions


def test_table_has_contract_schema_and_execution_order(zoo: pl.DataFrame) -> None:
    assert zoo.schema == pl.Schema(LAYER_SCHEMA)
    assert zoo["model"].unique(maintain_order=True).to_list() == list(BUILTIN_MODELS)
    for (_model,), rows in zoo.group_by("model"):
        assert rows["layer"].to_list() == list(range(rows.height))
    assert set(zoo["op"].unique()) == set(LAYER_OPS)
    assert (zoo["name"].str.len_chars() > 0).all()


def test_macs_equal_the_documented_formula(zoo: pl.DataFrame) -> None:
    dims = pl.col("N").cast(pl.Int64) * pl.col("K") * pl.col("C") * pl.col("Y") * pl.col("X")
    dims = dims * pl.col("R") * pl.col("S")
    groups = pl.when(pl.col("op") == "matmul").then(pl.col("groups")).otherwise(1)
    outputs = pl.col("N").cast(pl.Int64) * pl.col("K") * pl.col("Y") * pl.col("X") * groups
    checked = zoo.select(
        (pl.col("macs") == dims * groups).all().alias("macs"),
        (pl.col("out_elems") == outputs).all().alias("out_elems"),
        (pl.col("macs") > 0).all().alias("positive"),
    )
    assert checked.row(0) == (True, True, True)


def test_depthwise_grouped_and_strided_fields(zoo: pl.DataFrame) -> None:
    first_dw = model_rows(zoo, "mobilenet_v2").filter(pl.col("op") == "dwconv").row(0, named=True)
    assert first_dw["name"] == "features.1.conv.0.0"
    assert (first_dw["K"], first_dw["C"], first_dw["groups"], first_dw["stride"]) == (32, 1, 32, 1)
    assert (first_dw["Y"], first_dw["X"], first_dw["R"], first_dw["S"]) == (112, 112, 3, 3)
    strided_dw = row(model_rows(zoo, "mobilenet_v2"), "features.2.conv.1.0")
    assert (strided_dw["op"], strided_dw["stride"], strided_dw["Y"]) == ("dwconv", 2, 56)

    alexnet = model_rows(zoo, "alexnet")
    conv2 = row(alexnet, "conv2")
    assert (conv2["op"], conv2["groups"], conv2["C"], conv2["K"]) == ("conv", 2, 48, 256)
    assert row(alexnet, "conv1")["stride"] == 4
    assert row(alexnet, "conv3")["groups"] == 1

    resnet = model_rows(zoo, "resnet50")
    assert row(resnet, "layer2.0.conv1")["stride"] == 1  # v1.5: the stride is on the 3×3
    assert row(resnet, "layer2.0.conv2")["stride"] == 2
    assert row(resnet, "layer2.0.downsample.0")["stride"] == 2
    fc = row(resnet, "fc")
    assert (fc["op"], fc["N"], fc["C"], fc["K"], fc["Y"]) == ("linear", 1, 2048, 1000, 1)


def test_unet_is_the_original_unpadded_network(zoo: pl.DataFrame) -> None:
    unet = model_rows(zoo, "unet")
    first, head = unet.row(0, named=True), unet.row(-1, named=True)
    assert (first["C"], first["Y"], first["X"]) == (1, 570, 570)
    assert (head["K"], head["Y"], head["X"]) == (2, 388, 388)
    up = row(unet, "up.0.up")  # 2×2 stride-2 up-convolution: 28×28×1024 → 56×56×512
    assert (up["K"], up["C"], up["Y"], up["R"], up["stride"]) == (512, 1024, 56, 1, 1)
    assert up["macs"] == 28 * 28 * 1024 * 512 * 2 * 2


def test_batch_scales_macs_and_keeps_config_order() -> None:
    table = layer_table({"big": {"model": "resnet50", "batch": 4}, "resnet50": {}})
    assert table["model"].unique(maintain_order=True).to_list() == ["big", "resnet50"]
    macs = dict(table.group_by("model").agg(pl.col("macs").sum()).iter_rows())
    assert macs["big"] == 4 * macs["resnet50"]
    assert row(table.filter(pl.col("model") == "big"), "conv1")["N"] == 4
    assert row(table.filter(pl.col("model") == "big"), "fc")["Y"] == 4


def test_parquet_round_trip_keeps_schema_and_values(zoo: pl.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "layers.parquet"
    write_parquet(zoo, path)
    back = read_parquet(path, LayerTable)
    assert back.schema == zoo.schema
    assert back.equals(zoo)


def test_model_summary(zoo: pl.DataFrame) -> None:
    models = {"resnet50": {}, "gpt2": {"seq_len": 64}}
    layers = layer_table(models)
    summary = model_summary(models, layers)
    assert summary.columns == ["model", "layers", "macs", "params"]
    resnet = summary.row(0, named=True)
    assert resnet == {
        "model": "resnet50",
        "layers": 54,  # 53 convolutions + fc
        "macs": model_rows(zoo, "resnet50")["macs"].sum(),
        "params": 25_557_032,
    }


# ------------------------------------------------------------------------------------------------
# User modules and the meta device


def test_user_module_is_extracted(user_models: str) -> None:
    entry = {
        "factory": f"{user_models}:TinyCNN",
        "input_shape": [2, 3, 32, 32],
        "kwargs": {"width": 4},
    }
    table = layer_table({"tiny": entry})
    assert table["name"].to_list() == ["stem", "depthwise", "multiplier", "up", "temporal", "head"]
    assert table["op"].to_list() == ["conv", "dwconv", "conv", "conv", "conv", "linear"]
    multiplier = row(table, "multiplier")  # groups == C_in but K = 2 × C_in: not depthwise
    assert (multiplier["groups"], multiplier["C"], multiplier["K"]) == (4, 1, 8)
    up = row(table, "up")
    assert (up["Y"], up["R"], up["macs"]) == (32, 1, 2 * 16 * 16 * 8 * 4 * 2 * 2)
    temporal = row(table, "temporal")
    assert (temporal["Y"], temporal["X"], temporal["R"], temporal["S"]) == (1, 1020, 1, 5)
    assert row(table, "head")["Y"] == 2


def test_functional_attention_names_and_rows(user_models: str) -> None:
    entry = {"factory": f"{user_models}.FunctionalAttention", "input_shape": [3, 10, 16]}
    table = layer_table({"attn": entry})
    assert table["name"].to_list() == [
        "matmul0",
        "matmul1",
        "matmul2",
        "attention0.qk",
        "attention0.av",
    ]
    assert table["op"].to_list() == ["linear", "matmul", "matmul", "matmul", "matmul"]
    projection = table.row(0, named=True)  # x @ Parameter is a linear layer over all 30 tokens
    assert projection["Y"] == 30  # batch 3 × 10 tokens
    assert (projection["C"], projection["K"], projection["groups"]) == (16, 16, 1)
    for matmul in table.slice(1).iter_rows(named=True):
        assert matmul["groups"] == 3 * 2
        assert matmul["Y"] == 10


def test_unsupported_composite_operator_is_refused(user_models: str) -> None:
    entry = {"factory": f"{user_models}:TorchMultiheadAttention", "input_shape": [1, 4, 16]}
    with pytest.raises(InputError, match=r"models\.mha: .*scaled_dot_product.* in module 'attn'"):
        layer_table({"mha": entry}, source="config.yaml")


def test_tracing_allocates_nothing(user_models: str) -> None:
    module, inputs = build_model("resnet50", {"batch": 64})
    assert {p.device.type for p in module.parameters()} == {"meta"}
    assert {t.device.type for t in inputs} == {"meta"}
    entry = {"factory": f"{user_models}:HugeLinear", "input_shape": [8, 100_000]}
    table = layer_table({"huge": entry})  # 40 GB of weights if it were allocated
    assert table["w_elems"].to_list() == [100_000 * 100_000]


def test_factory_with_token_inputs_and_kwargs() -> None:
    entry = {
        "factory": "relmas.zoo.transformer:BertEncoder",
        "input_shape": [1, 16],
        "input_dtype": "long",
        "kwargs": {"depth": 2, "heads": 4},
    }
    table = layer_table({"bert_small": entry})
    assert table.height == 2 * 8
    assert row(table, "layers.1.attn.qk")["groups"] == 4


def test_empty_model_is_refused() -> None:
    entry = {"factory": "torch.nn:ReLU", "input_shape": [4]}
    with pytest.raises(InputError, match="models.relu: expected a model with a conv"):
        layer_table({"relu": entry})


def test_extract_layers_accepts_keyword_inputs() -> None:
    module, (ids,) = build_model("bert_base", {"seq_len": 16})
    table = extract_layers(module, {"ids": ids}, "bert")
    assert table.schema == pl.Schema(LAYER_SCHEMA)
    assert table.height == 12 * 8


# ------------------------------------------------------------------------------------------------
# Errors name the file and the key


@pytest.mark.parametrize(
    ("models", "key"),
    [
        ({"resnet51": {}}, "models.resnet51"),
        ({"x": {"model": "nope"}}, "models.x.model"),
        ({"x": {"model": ["resnet50"]}}, "models.x.model"),
        ({"x": ["resnet50"]}, "models.x"),
        ({"resnet50": {"batch": -1}}, "models.resnet50.batch"),
        ({"resnet50": {"image_size": 0}}, "models.resnet50.image_size"),
        ({"resnet50": {"batch": True}}, "models.resnet50.batch"),
        ({"gpt2": {"seq_len": 1025}}, "models.gpt2.seq_len"),
        ({"resnet50": {"seq_len": 128}}, "models.resnet50.seq_len"),
        ({"unet": {"image_size": 64}}, "models.unet"),
        ({"m": {"factory": "no_such_package.models:Net", "input_shape": [1]}}, "models.m.factory"),
        ({"m": {"factory": "zoo_user_models:Missing", "input_shape": [1]}}, "models.m.factory"),
        (
            {"m": {"factory": "zoo_user_models:not_a_module", "input_shape": [1]}},
            "models.m.factory",
        ),
        (
            {"m": {"factory": "zoo_user_models:TinyCNN", "input_shape": [1, -3]}},
            "models.m.input_shape",
        ),
        ({"m": {"factory": "zoo_user_models:TinyCNN"}}, "models.m.input_shape"),
        (
            {"m": {"factory": "zoo_user_models:TinyCNN", "input_shape": [1], "kwargs": {"w": 1}}},
            "models.m.factory",
        ),
        (
            {"m": {"factory": "zoo_user_models:TinyCNN", "input_shape": [1], "batch": 2}},
            "models.m.batch",
        ),
        ({"m": {"factory": "zoo_user_models:TinyCNN", "input_shape": [1, 3, 2, 2]}}, "models.m"),
    ],
)
def test_bad_entries_raise_input_error_naming_the_key(
    user_models: str, models: dict, key: str
) -> None:
    with pytest.raises(InputError) as caught:
        layer_table(models, source="config.yaml")
    assert caught.value.file == "config.yaml"
    assert caught.value.key == key
    assert str(caught.value).startswith(f"config.yaml: {key}: expected ")
