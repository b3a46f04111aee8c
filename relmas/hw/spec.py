"""Accelerator specs: validated immutable descriptions of an Eyeriss-like or Simba-like accelerator.

A spec is what the cost models read and what a cost table's metadata records, so it carries every
number that changes a cost: the contract sizes (docs/design.md, "config keys") plus the resolved
per-access energies and static power, with the family defaults filled in. `spec_json` is its
canonical form and `spec_hash` the hash that ties a cost table to the spec it was computed for.

Energy defaults (pJ per access of one word, per MAC for `mac`; see docs/costmodel.md):

- Eyeriss (65 nm, 16-bit reference): the JSSC 2017 relative costs MAC 1x, scratchpad 1x,
  inter-PE 2x, global buffer 6x, DRAM 200x, anchored at 1.5 pJ per 16-bit MAC.
- Simba (16 nm, 8-bit reference): split so that a dense convolution at full reuse costs about
  0.22 pJ per MAC on chip, Simba's published 0.11 pJ/op (one MAC = two ops).

At another `word_bits` the defaults scale linearly with the width for storage and transfers and
quadratically for the MAC; values given under `energy_pj:` are used as they are.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from relmas.errors import InputError

KINDS = ("eyeriss", "simba")

EYERISS_ACCESSES: dict[str, str] = {
    "mac": "one multiply-accumulate",
    "spad": "one word read or written in a PE scratchpad (ifmap, filter or psum)",
    "noc": "one word passed between neighbouring PEs (psum accumulation)",
    "glb": "one word read or written in the global buffer",
    "dram": "one word read or written off chip",
}
SIMBA_ACCESSES: dict[str, str] = {
    "mac": "one multiply-accumulate",
    "weight_buf": "one word read or written in a PE weight buffer",
    "input_buf": "one word read or written in a PE input buffer",
    "accum_buf": "one entry (24-bit at 8-bit words) read or written in an accumulation buffer",
    "noc": "one word carried by the on-chiplet network (global buffer <-> PE, PE <-> PE)",
    "glb": "one word read or written in a chiplet's global buffer",
    "nop": "one word carried by the package network between chiplets",
    "dram": "one word read or written off chip",
}

_EYERISS_REFERENCE_BITS = 16
_EYERISS_MAC_PJ = 1.5
_EYERISS_DEFAULT_PJ = {
    "mac": _EYERISS_MAC_PJ,
    "spad": 1.0 * _EYERISS_MAC_PJ,
    "noc": 2.0 * _EYERISS_MAC_PJ,
    "glb": 6.0 * _EYERISS_MAC_PJ,
    "dram": 200.0 * _EYERISS_MAC_PJ,
}
_SIMBA_REFERENCE_BITS = 8
_SIMBA_DEFAULT_PJ = {
    "mac": 0.07,
    "weight_buf": 0.25,
    "input_buf": 0.3,
    "accum_buf": 0.35,
    "noc": 0.15,
    "glb": 0.5,
    "nop": 10.0,
    "dram": 32.0,
}

# Static power defaults: leakage per MAC unit plus per KiB of on-chip SRAM (coarse, see docs).
_EYERISS_STATIC_W_PER_PE = 1.0e-4
_EYERISS_STATIC_W_PER_KIB = 5.0e-5
_SIMBA_STATIC_W_PER_MAC = 1.0e-5
_SIMBA_STATIC_W_PER_KIB = 2.0e-5

# Simba accumulates in 24-bit entries for 8-bit data: a partial sum is three words wide.
SIMBA_PSUM_WORDS = 3
EYERISS_PSUM_WORDS = 1


@dataclass(frozen=True)
class EyerissSpec:
    """Row-stationary array of `pe_rows` x `pe_cols` PEs, one MAC per PE per cycle.

    `set_shapes: chip` limits the mapping to the PE sets the JSSC 2017 chip uses (all filter rows,
    all output rows unless they exceed the array's width); `fill_words_per_cycle` > 0 charges each
    processing pass the time to fill its filter scratchpads before computing (the chip's ramp-up);
    `glb_allocation: chip` fills the global buffer as the chip does (one pass's ifmaps beside the
    partial sums kept until complete, JSSC 2017 Table III).
    """

    kind: str
    clock_ghz: float
    pe_rows: int
    pe_cols: int
    glb_kib: float
    ifmap_spad: int
    filter_spad: int
    psum_spad: int
    word_bits: int
    set_shapes: str
    fill_words_per_cycle: float
    glb_allocation: str
    energy_pj: Mapping[str, float] = field(compare=True, hash=False)
    static_w: float

    @property
    def mac_units(self) -> int:
        return self.pe_rows * self.pe_cols

    @property
    def glb_words(self) -> int:
        return _words(self.glb_kib, self.word_bits)


@dataclass(frozen=True)
class SimbaSpec:
    """Weight-stationary chiplets of PEs, each with `lanes` vector MACs of `vector_width` MACs.

    `weight_buf_kib` and `input_buf_kib` are per PE (the weight buffer split evenly across the
    lanes), `accum_buf_entries` per lane (Simba: 128), `glb_kib` per chiplet.
    """

    kind: str
    clock_ghz: float
    chiplets: int
    pes_per_chiplet: int
    lanes: int
    vector_width: int
    weight_buf_kib: float
    input_buf_kib: float
    accum_buf_entries: int
    glb_kib: float
    word_bits: int
    energy_pj: Mapping[str, float] = field(compare=True, hash=False)
    static_w: float

    @property
    def mac_units(self) -> int:
        return self.chiplets * self.pes_per_chiplet * self.lanes * self.vector_width

    @property
    def weight_words_per_lane(self) -> int:
        return _words(self.weight_buf_kib, self.word_bits) // self.lanes

    @property
    def input_buf_words(self) -> int:
        return _words(self.input_buf_kib, self.word_bits)

    @property
    def glb_words(self) -> int:
        return _words(self.glb_kib, self.word_bits)


Spec = EyerissSpec | SimbaSpec

_INT_KEYS = {
    "pe_rows",
    "pe_cols",
    "ifmap_spad",
    "filter_spad",
    "psum_spad",
    "word_bits",
    "chiplets",
    "pes_per_chiplet",
    "lanes",
    "vector_width",
    "accum_buf_entries",
}
_OPTIONAL_KEYS = ("energy_pj", "static_w")
# Optional keys of one family and their defaults: the whole mapping space, no per-pass fill time.
_FAMILY_OPTIONS: dict[str, dict[str, Any]] = {
    "eyeriss": {"set_shapes": "any", "fill_words_per_cycle": 0.0, "glb_allocation": "any"},
    "simba": {},
}
# Choices of the Eyeriss mapping rules: `any` keeps the whole space, `chip` the JSSC 2017 chip's.
SET_SHAPES = ("any", "chip")
GLB_ALLOCATIONS = ("any", "chip")
_CLASSES: dict[str, type] = {"eyeriss": EyerissSpec, "simba": SimbaSpec}
# A word is whole bytes (DRAM traffic and buffer sizes are counted in bytes) of a datapath at most
# 64 bits wide: widths between, or of 3 bits, would cost a fraction of the traffic a real one moves.
WORD_BITS = range(8, 65, 8)


def size_keys(kind: str) -> tuple[str, ...]:
    """The contract size keys of a family in declaration order (no `kind`, no optional keys)."""
    optional = (*_OPTIONAL_KEYS, *_FAMILY_OPTIONS[kind])
    return tuple(f.name for f in fields(_CLASSES[kind]) if f.name not in ("kind", *optional))


def parse_spec(
    name: str, raw: Any, source: str | Path | None, key_prefix: str | None = None
) -> Spec:
    """Validate one accelerator spec and fill in the energy and static-power defaults.

    Errors name `accelerators.{name}.{key}` (or `{key_prefix}.{key}` when given, bare keys for "").
    """
    prefix = f"accelerators.{name}" if key_prefix is None else key_prefix

    def key(k: str) -> str:
        return f"{prefix}.{k}" if prefix else k

    if not isinstance(raw, Mapping):
        raise InputError(source, prefix or None, "a mapping of spec keys", type(raw).__name__)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise InputError(source, key("kind"), f"one of {list(KINDS)}", kind if kind else "missing")
    required = size_keys(kind)
    options = _FAMILY_OPTIONS[kind]
    for k in raw:
        if k != "kind" and k not in required and k not in _OPTIONAL_KEYS and k not in options:
            known = sorted(("kind", *required, *_OPTIONAL_KEYS, *options))
            raise InputError(source, key(str(k)), f"a known {kind} key (one of {known})")
    values: dict[str, Any] = {"kind": kind}
    for k in required:
        if k not in raw:
            raise InputError(source, key(k), "this key to be present", "missing")
        values[k] = _positive(raw[k], k in _INT_KEYS, source, key(k))
    if values["word_bits"] not in WORD_BITS:
        expected = f"a multiple of 8, at least {WORD_BITS[0]} and at most {WORD_BITS[-1]} (bits)"
        raise InputError(source, key("word_bits"), expected, values["word_bits"])
    values.update(_family_options(kind, raw, source, key))
    values["energy_pj"] = _energy(kind, values["word_bits"], raw.get("energy_pj"), source, key)
    values["static_w"] = _static_w(kind, values, raw.get("static_w"), source, key)
    spec = _CLASSES[kind](**values)
    _check_buffers(spec, source, key)
    return spec


# The key of a cost table's metadata that holds the `spec_json` of its accelerator (relmas.profile).
META_SPEC_JSON = "relmas.spec_json"


def spec_json(spec: Spec) -> str:
    """Canonical JSON of every field, defaults included (what a cost table's metadata stores)."""
    data = {f.name: getattr(spec, f.name) for f in fields(spec)}
    data["energy_pj"] = dict(sorted(spec.energy_pj.items()))
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def spec_hash(spec: Spec) -> str:
    """sha256 of `spec_json`: equal for equal specs whatever the key order or number spelling."""
    return hashlib.sha256(spec_json(spec).encode()).hexdigest()


def spec_from_json(text: str, source: str | Path | None = None) -> Spec:
    """Rebuild a spec from `spec_json` output (e.g. read back from a cost table's metadata)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, "metadata.relmas.spec_json", "valid JSON", str(exc)) from None
    return parse_spec("", raw, source, key_prefix="spec")


def load_spec_file(path: str | Path) -> tuple[str, Spec]:
    """Read a `--spec SPEC.yaml` file: the keys of one `accelerators:` entry, optionally `name:`.

    The accelerator's name is the `name:` key when present, else the file's stem.
    """
    from relmas.paths import check_name
    from relmas.yaml_load import load_yaml

    raw = load_yaml(path)
    if not isinstance(raw, Mapping):
        raise InputError(path, None, "a mapping of accelerator spec keys", type(raw).__name__)
    raw = dict(raw)
    name = raw.pop("name", Path(path).stem)
    check_name(name, path, "name")
    return name, parse_spec(name, raw, path, key_prefix="")


def default_energy_pj(kind: str, word_bits: int) -> dict[str, float]:
    """The family's default energy per access at `word_bits` (see the module docstring)."""
    reference, table = (
        (_EYERISS_REFERENCE_BITS, _EYERISS_DEFAULT_PJ)
        if kind == "eyeriss"
        else (_SIMBA_REFERENCE_BITS, _SIMBA_DEFAULT_PJ)
    )
    width = word_bits / reference
    return {k: v * (width * width if k == "mac" else width) for k, v in table.items()}


def _words(kib: float, word_bits: int) -> int:
    return int(kib * 1024 * 8) // word_bits


def _positive(value: Any, integer: bool, source: str | Path | None, key: str) -> int | float:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if integer and not (isinstance(value, int) and not isinstance(value, bool)):
        raise InputError(source, key, "a positive integer", value)
    if not is_number or not math.isfinite(value) or value <= 0:
        raise InputError(
            source, key, "a positive integer" if integer else "a positive number", value
        )
    return int(value) if integer else float(value)


def _family_options(kind: str, raw: Mapping[str, Any], source, key) -> dict[str, Any]:
    """The family's optional mapping keys, defaults filled in (docs/costmodel.md, "Silicon")."""
    values = {k: raw.get(k, default) for k, default in _FAMILY_OPTIONS[kind].items()}
    for option, choices in (("set_shapes", SET_SHAPES), ("glb_allocation", GLB_ALLOCATIONS)):
        choice = values.get(option, choices[0])
        if choice not in choices:
            raise InputError(source, key(option), f"one of {list(choices)}", choice)
    if "fill_words_per_cycle" in values:
        fill = values["fill_words_per_cycle"]
        number = isinstance(fill, int | float) and not isinstance(fill, bool)
        if not number or not math.isfinite(fill) or fill < 0:
            raise InputError(
                source, key("fill_words_per_cycle"), "a number >= 0 (0: no fill time)", fill
            )
        values["fill_words_per_cycle"] = float(fill)
    return values


def _energy(kind: str, word_bits: int, raw: Any, source, key) -> dict[str, float]:
    energy = default_energy_pj(kind, word_bits)
    if raw is None:
        return energy
    if not isinstance(raw, Mapping):
        raise InputError(source, key("energy_pj"), "a mapping access -> pJ", type(raw).__name__)
    accesses = EYERISS_ACCESSES if kind == "eyeriss" else SIMBA_ACCESSES
    for access, value in raw.items():
        if access not in accesses:
            raise InputError(
                source, key(f"energy_pj.{access}"), f"a {kind} access (one of {list(accesses)})"
            )
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise InputError(source, key(f"energy_pj.{access}"), "a number >= 0 (pJ)", value)
        energy[access] = float(value)
    return energy


def _static_w(kind: str, values: Mapping[str, Any], raw: Any, source, key) -> float:
    if raw is not None:
        number = isinstance(raw, int | float) and not isinstance(raw, bool)
        if not number or not math.isfinite(raw) or raw < 0:
            raise InputError(source, key("static_w"), "a number >= 0 (W)", raw)
        return float(raw)
    bytes_per_word = values["word_bits"] / 8
    if kind == "eyeriss":
        pes = values["pe_rows"] * values["pe_cols"]
        spad_words = values["ifmap_spad"] + values["filter_spad"] + values["psum_spad"]
        kib = values["glb_kib"] + pes * spad_words * bytes_per_word / 1024
        return pes * _EYERISS_STATIC_W_PER_PE + kib * _EYERISS_STATIC_W_PER_KIB
    pes = values["chiplets"] * values["pes_per_chiplet"]
    macs = pes * values["lanes"] * values["vector_width"]
    accum_kib = values["lanes"] * values["accum_buf_entries"] * SIMBA_PSUM_WORDS * bytes_per_word
    per_pe_kib = values["weight_buf_kib"] + values["input_buf_kib"] + accum_kib / 1024
    kib = pes * per_pe_kib + values["chiplets"] * values["glb_kib"]
    return macs * _SIMBA_STATIC_W_PER_MAC + kib * _SIMBA_STATIC_W_PER_KIB


def _check_buffers(spec: Spec, source, key) -> None:
    """Reject buffers too small to hold the smallest tile of any layer."""

    def too_small(k: str, words: int, what: str) -> InputError:
        kib = words * spec.word_bits / 8 / 1024
        return InputError(
            source, key(k), f"room for {what} ({words} words = {kib:.3g} KiB)", getattr(spec, k)
        )

    if isinstance(spec, EyerissSpec):
        if spec.glb_words < 2:
            raise too_small("glb_kib", 2, "one input word and one partial sum")
        return
    if spec.weight_words_per_lane < spec.vector_width:
        raise too_small(
            "weight_buf_kib", spec.lanes * spec.vector_width, "one weight vector per lane"
        )
    if spec.input_buf_words < spec.vector_width:
        raise too_small("input_buf_kib", spec.vector_width, "one input vector")
    glb_needed = spec.vector_width + spec.lanes * SIMBA_PSUM_WORDS
    if spec.glb_words < glb_needed:
        raise too_small("glb_kib", glb_needed, "one input vector and one partial sum per lane")
