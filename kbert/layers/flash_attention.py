"""Flash attention with the paper's attention dropout: Pallas kernels, Triton on an NVIDIA GPU.

cuDNN's fused attention has no dropout that JAX can use, so a block that trains with attention
dropout runs the einsum, which writes the [batch, heads, query, key] probabilities and their
dropped copy to memory and reads them back for the gradient. These kernels never write them:
each tile of scores stays on chip, the softmax is computed online over tiles of keys
(FlashAttention-2, Dao 2023), and the dropout mask is recomputed wherever it is needed from
`kbert.layers.dropout.hash_bits` of the element's flat index in [batch, heads, query, key].
Those are the bits the einsum path's `Dropout` draws for the same seed, so both paths drop the
same entries and their outputs and gradients agree (tests/layers/test_flash_attention.py).

The gradient, with P the softmax, Z the kept entries scaled by 1 / (1 - rate) (0 elsewhere), O =
(P∘Z)V and δ = rowsum(dO∘O) per query: dV = (P∘Z)ᵀdO, dS = P∘((dO Vᵀ)∘Z - δ), dQ = dS K·c and
dK = dSᵀ Q·c, c being the score scale 1/√d. δ is the same as without dropout because
rowsum(P∘Z∘(dO Vᵀ)) = rowsum(dO∘(P∘Z)V).

Keys past each row's length are masked (the padding is a prefix mask, as for `fused`); queries
past it attend like any other, as in the einsum. Off a GPU the kernels run in Pallas'
interpreter: exact, slow, for tests.
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from kbert.layers.attention_kernel import FLASH_HEAD_SIZES
from kbert.layers.dropout import hash_bits, hash_keys

# Tile sizes (queries × keys forward; one square size backward), the fastest of four timed
# (benchmarks/README.md, "Attention kernels on a GPU"); each is cut to the largest power of two
# that divides the sequence.
FORWARD_BLOCKS = (128, 64)
BACKWARD_BLOCK = 64
_LOG2_E = math.log2(math.e)  # scores go through exp2: e^x = 2^(x·log2 e)
_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)  # finite: exp2 of it minus a max is 0


def flash_attention(query, key, value, lengths, rate=0.0, seed=None, interpret=None):
    """softmax(q·kᵀ/√d) with dropout at `rate`, times v; q, k, v [batch, seq, heads, head_size].

    `lengths` [batch] int32: keys at or past a row's length are masked. `seed` (two integers,
    a `SeedGenerator` state) keys the dropout mask when `rate` > 0. `interpret` runs the
    kernels in Pallas' interpreter (default: unless JAX computes on a GPU).
    """
    batch, seq, heads, head_size = query.shape
    if head_size not in FLASH_HEAD_SIZES:
        raise ValueError(f"Flash attention takes a head size in {FLASH_HEAD_SIZES}, not "
                         f"{head_size}.")
    if seq % 16:
        raise ValueError(f"Flash attention takes a sequence length that is a multiple of 16, "
                         f"not {seq}.")
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"Dropout rate must be in [0, 1), got {rate}.")
    if rate > 0 and seed is None:
        raise ValueError("Attention dropout needs a seed.")
    keys = (jnp.stack(hash_keys(seed)) if rate > 0 else jnp.zeros((2,), jnp.uint32))
    lengths = jnp.reshape(lengths.astype(jnp.int32), (batch, 1))
    if interpret is None:
        interpret = jax.default_backend() != "gpu"
    return _attention(query, key, value, lengths, keys, float(rate), bool(interpret))


def _block(seq, preferred):
    return next(b for b in (128, 64, 32, 16) if b <= preferred and seq % b == 0)


def _dropout_keys(keys_ref, heads):
    """(index of this program's (batch, head) plane, the two hash keys): read at the kernel's
    top level (grid axes 0 and 1), where the interpreter resolves `program_id`."""
    return pl.program_id(0) * heads + pl.program_id(1), (keys_ref[0], keys_ref[1])


def _kept(rows, cols, plane, keys, seq, rate):
    """Whether dropout keeps each entry (query `rows` × key `cols`) of a tile of `plane`."""
    row_ids = (plane * seq + rows).astype(jnp.uint32)
    index = row_ids[:, None] * jnp.uint32(seq) + cols.astype(jnp.uint32)[None, :]
    threshold = jnp.uint32(int(round(rate * 2**32)))
    return hash_bits(index, *keys) >= threshold


def _forward_kernel(q_ref, k_ref, v_ref, lengths_ref, keys_ref, o_ref, lse_ref, *, scale,
                    rate, block_k, heads):
    block_q, seq = q_ref.shape[0], k_ref.shape[0]
    start = pl.program_id(2) * block_q
    rows = start + jnp.arange(block_q)
    length = lengths_ref[0]
    plane, keys = _dropout_keys(keys_ref, heads)
    q = q_ref[...]

    def tile(j, carry):
        out, row_max, total = carry
        cols = j * block_k + jnp.arange(block_k)
        k = k_ref[pl.ds(j * block_k, block_k), :]
        scores = plgpu.dot(q, k, trans_b=True) * (scale * _LOG2_E)
        scores = jnp.where((cols < length)[None, :], scores, _MASKED)
        new_max = jnp.maximum(row_max, jnp.max(scores, axis=1))
        correction = jnp.exp2(row_max - new_max)
        p = jnp.exp2(scores - new_max[:, None])
        total = total * correction + jnp.sum(p, axis=1)  # the softmax sums all, kept or not
        if rate > 0:
            p = jnp.where(_kept(rows, cols, plane, keys, seq, rate), p, 0.0)
        v = v_ref[pl.ds(j * block_k, block_k), :]
        out = out * correction[:, None] + plgpu.dot(p.astype(v.dtype), v)
        return out, new_max, total

    init = (jnp.zeros(q.shape, jnp.float32), jnp.full((block_q,), -jnp.inf, jnp.float32),
            jnp.zeros((block_q,), jnp.float32))
    out, row_max, total = lax.fori_loop(0, seq // block_k, tile, init)
    out = out / total[:, None] * (1.0 / (1.0 - rate))
    o_ref[...] = out.astype(o_ref.dtype)
    lse_ref[...] = row_max + jnp.log2(total)  # log2 of the softmax's denominator


def _forward(q, k, v, lengths, keys, rate, interpret):
    batch, seq, heads, head_size = q.shape
    block_q, block_k = (_block(seq, b) for b in FORWARD_BLOCKS)
    kernel = functools.partial(_forward_kernel, scale=1.0 / math.sqrt(head_size), rate=rate,
                               block_k=block_k, heads=heads)
    whole = pl.BlockSpec((None, seq, None, head_size), lambda b, h, i: (b, 0, h, 0))
    rows = pl.BlockSpec((None, block_q, None, head_size), lambda b, h, i: (b, i, h, 0))
    return pl.pallas_call(
        kernel,
        grid=(batch, heads, seq // block_q),
        in_specs=[rows, whole, whole, pl.BlockSpec((None, 1), lambda b, h, i: (b, 0)),
                  pl.BlockSpec((2,), lambda b, h, i: (0,))],
        out_specs=[rows, pl.BlockSpec((None, None, block_q), lambda b, h, i: (b, h, i))],
        out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype),
                   jax.ShapeDtypeStruct((batch, heads, seq), jnp.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=4 if head_size <= 64 else 8,
                                             num_stages=2),
        interpret=interpret,
        name="kbert_flash_attention_forward",
    )(q, k, v, lengths, keys)


def _backward_kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, lengths_ref, keys_ref,
                     dq_ref, dk_ref, dv_ref, *, scale, rate, block, heads):
    """Program (batch, head, j): dK and dV of key tile j (a loop over query tiles), then dQ of
    query tile j (a loop over key tiles)."""
    seq = q_ref.shape[0]
    length = lengths_ref[0]
    plane, keys = _dropout_keys(keys_ref, heads)
    inverse = 1.0 / (1.0 - rate)

    def grads(rows, cols, q, k, v, do, lse, delta):
        """(P∘Z, dS) of one tile: the dropped probabilities and the scores' gradient."""
        scores = plgpu.dot(q, k, trans_b=True) * (scale * _LOG2_E)
        scores = jnp.where((cols < length)[None, :], scores, _MASKED)
        p = jnp.exp2(scores - lse[:, None])
        dp = plgpu.dot(do, v, trans_b=True)
        if rate > 0:
            kept = _kept(rows, cols, plane, keys, seq, rate)
            dropped = jnp.where(kept, p * inverse, 0.0)
            dp = jnp.where(kept, dp * inverse, 0.0)
        else:
            dropped = p
        return dropped, p * (dp - delta[:, None])

    def query_tile(i):
        part = pl.ds(i * block, block)
        return (i * block + jnp.arange(block), q_ref[part, :], do_ref[part, :], lse_ref[part],
                delta_ref[part])

    def key_tile(j):
        part = pl.ds(j * block, block)
        return j * block + jnp.arange(block), k_ref[part, :], v_ref[part, :]

    j = pl.program_id(2)
    cols, k, v = key_tile(j)

    def key_grads(i, carry):
        dk, dv = carry
        rows, q, do, lse, delta = query_tile(i)
        dropped, ds = grads(rows, cols, q, k, v, do, lse, delta)
        dv = dv + plgpu.dot(dropped.astype(do.dtype), do, trans_a=True)
        dk = dk + plgpu.dot(ds.astype(q.dtype), q, trans_a=True)
        return dk, dv

    zeros = jnp.zeros(k.shape, jnp.float32)
    dk, dv = lax.fori_loop(0, seq // block, key_grads, (zeros, zeros))
    dk_ref[...] = (dk * scale).astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)

    rows, q, do, lse, delta = query_tile(j)

    def query_grads(i, dq):
        cols, k, v = key_tile(i)
        _, ds = grads(rows, cols, q, k, v, do, lse, delta)
        return dq + plgpu.dot(ds.astype(k.dtype), k)

    dq = lax.fori_loop(0, seq // block, query_grads, jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = (dq * scale).astype(dq_ref.dtype)


def _backward(q, k, v, out, lse, d_out, lengths, keys, rate, interpret):
    batch, seq, heads, head_size = q.shape
    block = _block(seq, BACKWARD_BLOCK)
    delta = jnp.einsum("bqhd,bqhd->bhq", out.astype(jnp.float32), d_out.astype(jnp.float32))
    kernel = functools.partial(_backward_kernel, scale=1.0 / math.sqrt(head_size), rate=rate,
                               block=block, heads=heads)
    whole = pl.BlockSpec((None, seq, None, head_size), lambda b, h, j: (b, 0, h, 0))
    per_row = pl.BlockSpec((None, None, seq), lambda b, h, j: (b, h, 0))
    tile = pl.BlockSpec((None, block, None, head_size), lambda b, h, j: (b, j, h, 0))
    return pl.pallas_call(
        kernel,
        grid=(batch, heads, seq // block),
        in_specs=[whole, whole, whole, whole, per_row, per_row,
                  pl.BlockSpec((None, 1), lambda b, h, j: (b, 0)),
                  pl.BlockSpec((2,), lambda b, h, j: (0,))],
        out_specs=[tile, tile, tile],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v)],
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
        name="kbert_flash_attention_backward",
    )(q, k, v, d_out, lse, delta, lengths, keys)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _attention(q, k, v, lengths, keys, rate, interpret):
    return _forward(q, k, v, lengths, keys, rate, interpret)[0]


def _attention_forward(q, k, v, lengths, keys, rate, interpret):
    out, lse = _forward(q, k, v, lengths, keys, rate, interpret)
    return out, (q, k, v, out, lse, lengths, keys)


def _attention_backward(rate, interpret, residuals, d_out):
    q, k, v, out, lse, lengths, keys = residuals
    dq, dk, dv = _backward(q, k, v, out, lse, d_out, lengths, keys, rate, interpret)
    return dq, dk, dv, None, None


_attention.defvjp(_attention_forward, _attention_backward)
