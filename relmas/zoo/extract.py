"""Layer extraction: run a module once on the `meta` device and record its MAC-bearing operators.

Why this way: meta tensors carry shapes but no storage, so a forward pass allocates no weights and
computes nothing, yet every operator sees its real argument shapes. A `TorchFunctionMode` sees the
functional calls (`F.conv2d`, `F.linear`, `torch.matmul`, `@`, `bmm`, ...), including the
activation × activation matmuls of attention that module hooks cannot see; module forward hooks
only keep track of which module is running, to name the rows. A `TorchDispatchMode` underneath
guards completeness: any aten-level MAC operator (convolution, mm, bmm, attention kernels, ...)
that does not come from a recorded call raises `UnattributedOperatorError`, so a model that hides
its MACs in an unsupported composite (e.g. `nn.MultiheadAttention`, `einsum`, `conv3d`) fails
loudly instead of being under-counted.

Row conventions (the layer table of docs/design.md):

- `conv`: `F.conv1d`/`F.conv2d`. N = batch, K = all output channels, C = input channels per
  group, (Y, X) = output size, (R, S) = kernel, stride = the row stride, groups as in torch.
  A 1-d convolution has Y = R = 1.
- `dwconv`: a convolution with groups == input channels == output channels > 1 (C = 1). A
  grouped convolution that is not depthwise (AlexNet's two groups, channel multipliers) is a
  `conv` with groups > 1.
- Transposed convolutions (`F.conv_transpose1d/2d`) are recorded as the equivalent direct `conv`
  of their sub-pixel form: (Y, X) = output size, (R, S) = ceil(kernel / stride), stride 1. This
  is exact when the kernel is a multiple of the stride (U-Net's 2×2 stride-2 up-convolution).
- `linear`: `F.linear`, or a matmul whose second operand is a 2-d `nn.Parameter`. N = 1,
  Y = all rows (batch × tokens), X = 1, C = input features, K = output features.
- `matmul`: any other matmul (`torch.matmul`, `@`, `mm`, `bmm`, `addmm`, `baddbmm`), activation
  × activation. N = 1, Y = rows of the first operand, C = reduction length, K = columns of the
  second operand, groups = number of independent matrix products (batch × heads). A
  `F.scaled_dot_product_attention` call becomes two matmul rows, `.qk` and `.av`.

MAC formula (asserted by the tests): macs = N·K·C·Y·X·R·S, times `groups` for `matmul` only
(for convolutions K already counts all groups and C is per group).

in_elems / w_elems / out_elems count the elements of the input, of the weights (or second
operand) and of the output. `name` is the path of the module whose forward issued the operator;
when that forward issues several operators directly (a functional attention), each gets a suffix
`.{function}{i}` (e.g. `attn.matmul0`, `attn.matmul1`); the root module's own operators are named
by the suffix alone.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from relmas.schemas import LAYER_SCHEMA

Row = dict[str, Any]


SUPPORTED_OPERATORS = (
    "F.conv1d/conv2d, F.conv_transpose1d/2d, F.linear, matmul/@/mm/bmm/addmm/baddbmm, "
    "F.scaled_dot_product_attention"
)


class UnattributedOperatorError(RuntimeError):
    """A MAC-bearing aten operator ran outside every operator the extractor understands."""

    def __init__(self, operator: str, module: str):
        self.operator = operator
        self.module = module
        super().__init__(
            f"operator aten.{operator} in module {module!r} is not one the layer extractor "
            f"understands ({SUPPORTED_OPERATORS})"
        )


def extract_layers(
    module: nn.Module, inputs: Sequence[torch.Tensor] | Mapping[str, torch.Tensor], model: str
) -> pl.DataFrame:
    """The layer table (LAYER_SCHEMA) of one forward pass of `module` on `inputs`.

    `inputs` are positional arguments (a tuple) or keyword arguments (a dict) of `forward`. Pass a
    module and inputs on the `meta` device for a free trace; the module's train/eval mode is used
    as it is.
    """
    tracker = _ModuleTracker(module)
    recorder = _OperatorRecorder(tracker)
    with torch.no_grad(), tracker.hooked(), _CompletenessGuard(recorder, tracker), recorder:
        if isinstance(inputs, Mapping):
            module(**inputs)
        else:
            module(*inputs)
    rows = [
        {"model": model, "layer": index, **row} for index, row in enumerate(recorder.named_rows())
    ]
    return pl.DataFrame(rows, schema=LAYER_SCHEMA)


# ------------------------------------------------------------------------------------------------
# Which module is running


@dataclass
class _Call:
    """One forward call of a module and the operators it issued itself (not its children)."""

    path: str
    ops: list[_Op] = field(default_factory=list)


@dataclass
class _Op:
    """One recorded functional call: its kind (for name suffixes) and its rows (one, or two)."""

    kind: str
    rows: list[Row]
    suffixes: tuple[str, ...]


class _ModuleTracker:
    """Keeps the stack of running module calls, via forward pre/post hooks on every submodule."""

    def __init__(self, root: nn.Module):
        self._root = root
        self._stack: list[_Call] = []

    @contextlib.contextmanager
    def hooked(self) -> Iterator[None]:
        handles = []
        for path, sub in self._root.named_modules():
            handles.append(sub.register_forward_pre_hook(self._enter(path)))
            handles.append(sub.register_forward_hook(self._leave))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _enter(self, path: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _args: object) -> None:
            self._stack.append(_Call(path))

        return hook

    def _leave(self, _module: nn.Module, _args: object, _output: object) -> None:
        _assign_names(self._stack.pop())

    @property
    def current(self) -> _Call:
        return self._stack[-1]

    @property
    def current_path(self) -> str:
        return self._stack[-1].path if self._stack else "<outside any module>"


def _assign_names(call: _Call) -> None:
    """A lone operator takes the module path; several get `.{kind}{i}` suffixes."""
    counts: dict[str, int] = {}
    alone = len(call.ops) == 1 and call.path != ""
    for op in call.ops:
        index = counts.get(op.kind, 0)
        counts[op.kind] = index + 1
        base = call.path if alone else ".".join(p for p in (call.path, f"{op.kind}{index}") if p)
        for row, suffix in zip(op.rows, op.suffixes, strict=True):
            row["name"] = base + suffix


# ------------------------------------------------------------------------------------------------
# Recording functional calls


class _OperatorRecorder(TorchFunctionMode):
    """Records a row for every MAC-bearing functional call, in execution order."""

    def __init__(self, tracker: _ModuleTracker):
        super().__init__()
        self._tracker = tracker
        self._ops: list[_Op] = []
        self.inside_recorded_call = False

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is None:
            return func(*args, **kwargs)
        kind, describe = handler
        self.inside_recorded_call = True
        try:
            out = func(*args, **kwargs)
        finally:
            self.inside_recorded_call = False
        rows = describe(_Args(tuple(args), kwargs), out)
        suffixes = (".qk", ".av") if len(rows) == 2 else ("",)
        op = _Op(kind, rows, suffixes)
        self._tracker.current.ops.append(op)
        self._ops.append(op)
        return out

    def named_rows(self) -> list[Row]:
        return [row for op in self._ops for row in op.rows]


# aten operators that multiply-accumulate: a word of the operator name that is a convolution, a
# matrix product (any word ending in "mm"), a dot/linear form, or an attention/transformer kernel.
_MAC_ATEN_OP = re.compile(
    r"(?:^|_)(?:conv(?:_transpose|_depthwise|_tbc|_dilated)?(?:[123]d)?|convolution|[a-z]*mm|mv"
    r"|addmv|dot|vdot|vecdot|matmul|linear|bilinear|trilinear|einsum|tensordot)(?:_|$)"
    r"|attention|transformer"
)


class _CompletenessGuard(TorchDispatchMode):
    """Fails on aten MAC operators that no recorded functional call accounts for."""

    def __init__(self, recorder: _OperatorRecorder, tracker: _ModuleTracker):
        super().__init__()
        self._recorder = recorder
        self._tracker = tracker

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = func.__name__.split(".")[0]
        if not self._recorder.inside_recorded_call and _MAC_ATEN_OP.search(name):
            raise UnattributedOperatorError(name, self._tracker.current_path)
        return func(*args, **(kwargs or {}))


# ------------------------------------------------------------------------------------------------
# Shapes → rows


@dataclass(frozen=True)
class _Args:
    """Positional-or-keyword access to a functional call's arguments."""

    args: tuple
    kwargs: dict

    def get(self, index: int, name: str, default: object = None) -> Any:
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)


def layer_row(
    op: str,
    *,
    N: int,
    K: int,
    C: int,
    Y: int,
    X: int,
    R: int,
    S: int,
    stride: int,
    groups: int,
    in_elems: int,
    w_elems: int,
    out_elems: int,
) -> Row:
    """One layer-table row without its model, index and name: the table's conventions in one
    place (K counts all groups of a convolution, C is per group, a matmul's MACs x its groups)."""
    macs = N * K * C * Y * X * R * S * (groups if op == "matmul" else 1)
    return {
        "name": "",
        "op": op,
        "N": N,
        "K": K,
        "C": C,
        "Y": Y,
        "X": X,
        "R": R,
        "S": S,
        "stride": stride,
        "groups": groups,
        "macs": macs,
        "in_elems": in_elems,
        "w_elems": w_elems,
        "out_elems": out_elems,
    }


def _first(value: int | Sequence[int]) -> int:
    return int(value) if isinstance(value, int) else int(value[0])


def _pair(value: int | Sequence[int], dims: int) -> tuple[int, ...]:
    return (int(value),) * dims if isinstance(value, int) else tuple(int(v) for v in value)


def _conv_op(groups: int, in_channels: int, out_channels: int) -> str:
    return "dwconv" if groups > 1 and groups == in_channels == out_channels else "conv"


def _conv_row(
    call: _Args,
    out: torch.Tensor,
    dims: int,
    *,
    op: str,
    out_channels: int,
    per_group: int,
    kernel: tuple[int, ...],
    stride: int,
    groups: int,
) -> Row:
    """A `dims`-D (transposed) convolution's row: its output's rows and columns, its taps
    (`kernel`, rows x columns; one row in 1-D) and its tensors' sizes."""
    x, weight = call.get(0, "input"), call.get(1, "weight")
    rows, cols = (1, out.shape[-1]) if dims == 1 else tuple(out.shape[-2:])
    kr, ks = (1, kernel[0]) if dims == 1 else kernel
    return layer_row(
        op,
        N=x.shape[0] if x.dim() == dims + 2 else 1,
        K=out_channels,
        C=per_group,
        Y=rows,
        X=cols,
        R=kr,
        S=ks,
        stride=stride,
        groups=groups,
        in_elems=x.numel(),
        w_elems=weight.numel(),
        out_elems=out.numel(),
    )


def _describe_conv(dims: int) -> Callable[[_Args, torch.Tensor], list[Row]]:
    def describe(call: _Args, out: torch.Tensor) -> list[Row]:
        weight = call.get(1, "weight")
        groups = int(call.get(6, "groups", 1))
        out_channels, per_group = weight.shape[0], weight.shape[1]
        row = _conv_row(
            call,
            out,
            dims,
            op=_conv_op(groups, per_group * groups, out_channels),
            out_channels=out_channels,
            per_group=per_group,
            kernel=tuple(weight.shape[2:]),
            stride=_first(call.get(3, "stride", 1)),
            groups=groups,
        )
        return [row]

    return describe


def _describe_conv_transpose(dims: int) -> Callable[[_Args, torch.Tensor], list[Row]]:
    def describe(call: _Args, out: torch.Tensor) -> list[Row]:
        weight = call.get(1, "weight")
        groups = int(call.get(6, "groups", 1))
        stride = _pair(call.get(3, "stride", 1), dims)
        kernel = tuple(weight.shape[2:])
        out_channels = weight.shape[1] * groups
        row = _conv_row(
            call,
            out,
            dims,
            op=_conv_op(groups, weight.shape[0], out_channels),
            out_channels=out_channels,
            per_group=weight.shape[0] // groups,
            # a sub-pixel convolution per output phase: ceil(k / s) taps each
            kernel=tuple(math.ceil(k / s) for k, s in zip(kernel, stride, strict=True)),
            stride=1,
            groups=groups,
        )
        return [row]

    return describe


def _describe_linear(call: _Args, out: torch.Tensor) -> list[Row]:
    x, weight = call.get(0, "input"), call.get(1, "weight")
    return [_linear_row(x, weight, out, out_features=weight.shape[0])]


def _product_row(
    op: str,
    *,
    rows: int,
    reduction: int,
    cols: int,
    groups: int,
    in_elems: int,
    w_elems: int,
    out_elems: int,
) -> Row:
    """A matrix product's row (a linear layer, a matmul): `groups` products of `rows` x
    `reduction` by `reduction` x `cols`, as a 1 x 1 convolution of `rows` output rows."""
    return layer_row(
        op,
        N=1,
        K=cols,
        C=reduction,
        Y=rows,
        X=1,
        R=1,
        S=1,
        stride=1,
        groups=groups,
        in_elems=in_elems,
        w_elems=w_elems,
        out_elems=out_elems,
    )


def _linear_row(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, out_features: int) -> Row:
    in_features = x.shape[-1]
    return _product_row(
        "linear",
        rows=x.numel() // in_features,
        reduction=in_features,
        cols=out_features,
        groups=1,
        in_elems=x.numel(),
        w_elems=weight.numel(),
        out_elems=out.numel(),
    )


def _matmul_row(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> Row:
    if isinstance(b, nn.Parameter) and b.dim() == 2:
        return _linear_row(a, b, out, out_features=b.shape[1])
    rows = a.shape[-2] if a.dim() > 1 else 1
    cols = b.shape[-1] if b.dim() > 1 else 1
    return _product_row(
        "matmul",
        rows=rows,
        reduction=a.shape[-1],
        cols=cols,
        groups=out.numel() // (rows * cols),
        in_elems=a.numel(),
        w_elems=b.numel(),
        out_elems=out.numel(),
    )


def _describe_matmul(first: int, second: int) -> Callable[[_Args, torch.Tensor], list[Row]]:
    def describe(call: _Args, out: torch.Tensor) -> list[Row]:
        return [_matmul_row(call.args[first], call.args[second], out)]

    return describe


def _describe_attention(call: _Args, out: torch.Tensor) -> list[Row]:
    q, k, v = call.get(0, "query"), call.get(1, "key"), call.get(2, "value")
    queries, keys = q.shape[-2], k.shape[-2]
    heads = out.numel() // (queries * v.shape[-1])
    scores = heads * queries * keys
    # Per head, the scores Q K^T (queries x d by d x keys), then their weighted sum of V.
    products = (
        (q.shape[-1], keys, q.numel(), k.numel(), scores),
        (keys, v.shape[-1], scores, v.numel(), out.numel()),
    )
    return [
        _product_row(
            "matmul",
            rows=queries,
            reduction=reduction,
            cols=cols,
            groups=heads,
            in_elems=in_elems,
            w_elems=w_elems,
            out_elems=out_elems,
        )
        for reduction, cols, in_elems, w_elems, out_elems in products
    ]


_MATMUL = _describe_matmul(0, 1)
_ADD_MATMUL = _describe_matmul(1, 2)

_HANDLERS: dict[Callable[..., Any], tuple[str, Callable[[_Args, torch.Tensor], list[Row]]]] = {
    F.conv1d: ("conv1d", _describe_conv(1)),
    F.conv2d: ("conv2d", _describe_conv(2)),
    F.conv_transpose1d: ("conv_transpose1d", _describe_conv_transpose(1)),
    F.conv_transpose2d: ("conv_transpose2d", _describe_conv_transpose(2)),
    F.linear: ("linear", _describe_linear),
    torch.matmul: ("matmul", _MATMUL),
    torch.Tensor.matmul: ("matmul", _MATMUL),
    torch.Tensor.__matmul__: ("matmul", _MATMUL),
    torch.Tensor.__rmatmul__: ("matmul", _describe_matmul(1, 0)),
    torch.mm: ("matmul", _MATMUL),
    torch.Tensor.mm: ("matmul", _MATMUL),
    torch.bmm: ("matmul", _MATMUL),
    torch.Tensor.bmm: ("matmul", _MATMUL),
    torch.addmm: ("matmul", _ADD_MATMUL),
    torch.Tensor.addmm: ("matmul", _ADD_MATMUL),
    torch.baddbmm: ("matmul", _ADD_MATMUL),
    torch.Tensor.baddbmm: ("matmul", _ADD_MATMUL),
    F.scaled_dot_product_attention: ("attention", _describe_attention),
}
