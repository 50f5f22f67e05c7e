"""A Qwen3/Llama-family decoder-only transformer in Flax NNX.

Layout (dimension letters as in tunix: b batch, t query time, s key slot, d model,
h query heads, k kv heads, g group = h/k, e head_dim, f ffn, v vocab, l layers):

  embed      [v, d]          ("vocab", "embed")
  q_proj     [d, h, e]       ("embed", "heads", "head_dim")
  k/v_proj   [d, k, e]       ("embed", "kv_heads", "head_dim")
  o_proj     [h, e, d]       ("heads", "head_dim", "embed")
  gate/up    [d, f]          ("embed", "mlp")
  down       [f, d]          ("mlp", "embed")
  lm_head    [d, v]          ("embed", "vocab")   (absent when embeddings are tied)
  KV cache   per layer [b, k, s, e], or stacked [l, b, k, s, e] for a scanned decode
             ("layers", "cache_batch", "cache_kv_heads", "cache_seq", -)

The decoder layers' weights are stored stacked: every layer parameter has a leading ``l`` axis
("layers"; the shapes above are one layer's). So the layers can run as one ``lax.scan`` whose body
is compiled once whatever the depth, and the optimizer updates one array per parameter kind instead
of one per layer; an unrolled forward reads layer ``i``'s slice.

Every parameter carries its logical axis names as the `logical_axes` metadata, which
`sharding.py` maps onto the (data, fsdp, tensor) mesh. RoPE follows HF's rotate-half
convention so HF checkpoints load without permuting q/k rows.

Two entry points share one attention core:
  * `model(input_ids, positions=None, attention_mask=None, segment_ids=None)` -> fp32 logits [b, t, v]
    (training / scoring; causal, with optional padding mask; packed rows attend within a segment).
  * `model.decode(tokens, positions, token_mask, cache)` -> (logits, cache): appends a
    chunk of tokens to a fixed-size `KVCache` (prefill, one decode step, or a multi-turn
    observation) and attends to every valid earlier slot.
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from cocoda_jax.models.config import ModelConfig
from cocoda_jax.models.sharding import constrain, param_shardings

_NEG = -0.7 * float(jnp.finfo(jnp.float32).max)


def _dtype(name: str):
    return {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[name]


def _param(rngs: nnx.Rngs, shape, axes, dtype, init="normal", std=0.02) -> nnx.Param:
    if init == "ones":
        value = jnp.ones(shape, dtype)
    else:
        value = (std * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(dtype)
    return nnx.Param(value, logical_axes=tuple(axes))


def dense(x, w, n_in: int = 1, preferred_element_type=None):
    """``x [..., *c] . w [*c, *o] -> [..., *o]`` (``c`` = w's first ``n_in`` axes) as one 2-D matrix
    product: every leading axis of ``x`` folded into one row axis, ``c`` and ``o`` into one axis each.

    Why not the einsum: XLA's CPU backward of ``einsum("btd,df->btf")`` and its 4-D kin contracts
    the weight gradient over two token axes and costs 1.5-1.7x the same products as 2-D matrices
    (docs/experiments.md section 7). The reshapes only merge axes the activation layout leaves
    unsplit or splits on the major one (batch; heads over ``tensor``), so sharding is unchanged."""
    c = w.shape[:n_in]
    if x.shape[x.ndim - n_in:] != c:
        raise ValueError(f"dense: x {x.shape} does not end with w's input axes {c}")
    lead, out = x.shape[:x.ndim - n_in], w.shape[n_in:]
    y = jnp.dot(x.reshape(-1, math.prod(c)), w.reshape(math.prod(c), -1),
                preferred_element_type=preferred_element_type)
    return y.reshape(*lead, *out)


# ------------------------------------------------------------------------ rotary
def rope_inv_freq(cfg: ModelConfig) -> jnp.ndarray:
    """Inverse frequencies [head_dim/2] with the config's rope scaling applied (fp32)."""
    e = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (jnp.arange(0, e, 2, dtype=jnp.float32) / e))
    rs = cfg.rope_scaling
    if rs.rope_type == "linear":
        inv = inv / rs.factor
    elif rs.rope_type == "llama3":
        old = rs.original_max_position_embeddings
        low_wl = old / rs.low_freq_factor
        high_wl = old / rs.high_freq_factor
        wl = 2 * math.pi / inv
        scaled = jnp.where(wl > low_wl, inv / rs.factor, inv)
        smooth = (old / wl - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor)
        smoothed = (1 - smooth) * scaled / rs.factor + smooth * scaled
        medium = (wl >= high_wl) & (wl <= low_wl)
        inv = jnp.where(medium, smoothed, scaled)
    return inv


def apply_rope(x: jnp.ndarray, positions: jnp.ndarray, inv_freq: jnp.ndarray) -> jnp.ndarray:
    """x [b, t, n, e], positions [b, t] -> rotated x (rotate-half convention, fp32 math)."""
    freqs = positions.astype(jnp.float32)[..., None] * inv_freq  # [b, t, e/2]
    cos = jnp.cos(freqs)[:, :, None, :]
    sin = jnp.sin(freqs)[:, :, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = jnp.split(xf, 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


# ------------------------------------------------------------------------ modules
class RMSNorm(nnx.Module):
    def __init__(self, dim: int, eps: float, axis_name: str, param_dtype, *, rngs: nnx.Rngs):
        self.scale = _param(rngs, (dim,), (axis_name,), param_dtype, init="ones")
        self.eps = eps

    def __call__(self, x):
        xf = x.astype(jnp.float32)
        var = jnp.mean(xf * xf, axis=-1, keepdims=True)
        y = (xf * jax.lax.rsqrt(var + self.eps)).astype(x.dtype)
        return self.scale[...].astype(x.dtype) * y


@flax.struct.dataclass
class KVCache:
    """Fixed-size KV cache. k, v: a tuple of one [b, k, s, e] buffer per layer (the unrolled decode
    updates each in place), or, ``stacked``, one [l, b, k, s, e] buffer (what a scanned decode carries
    whole, writing only the new tokens' slots; per-layer buffers are faster for the unrolled decode,
    measured by ``launch.bench.sampler``). The [b, k, s, e] layout of a layer makes both attention
    matmuls plain batched matmuls over (b, k), with no per-step transpose of the cache; valid: [b, s]
    (slot holds a real token); end: int32 scalar, the next slot to write (shared by the batch: rows
    are aligned)."""

    k: tuple | jnp.ndarray
    v: tuple | jnp.ndarray
    valid: jnp.ndarray
    end: jnp.ndarray

    @property
    def size(self) -> int:
        return self.valid.shape[1]

    @property
    def stacked(self) -> bool:
        return not isinstance(self.k, (tuple, list))

    def take_rows(self, rows: jnp.ndarray) -> "KVCache":
        """The cache of a batch whose row ``i`` is this cache's row ``rows[i]`` (a gather on the
        batch axis of every buffer: after one prefill of each distinct prompt, a group's rows)."""
        if self.stacked:  # [l, b, k, s, e]
            k, v = jnp.take(self.k, rows, axis=1), jnp.take(self.v, rows, axis=1)
        else:
            k = tuple(jnp.take(x, rows, axis=0) for x in self.k)
            v = tuple(jnp.take(x, rows, axis=0) for x in self.v)
        return self.replace(k=k, v=v, valid=jnp.take(self.valid, rows, axis=0))

    def compact(self) -> "KVCache":
        """Each row's valid slots moved to the front, in order; ``end`` = the longest row. A turn
        leaves holes (a row that stopped early, an observation shorter than its bucket); this drops
        them without recomputing anything: a slot's key carries its RoPE position, so the tokens
        attended to, and their keys and values, are unchanged (only where they sit)."""
        order = jnp.argsort(~self.valid, axis=1, stable=True)  # [b, s]: valid slots first, in slot order
        count = self.valid.sum(axis=1)
        if self.stacked:  # [l, b, k, s, e]
            idx = order[None, :, None, :, None]
            k, v = jnp.take_along_axis(self.k, idx, axis=3), jnp.take_along_axis(self.v, idx, axis=3)
        else:
            idx = order[:, None, :, None]
            k = tuple(jnp.take_along_axis(x, idx, axis=2) for x in self.k)
            v = tuple(jnp.take_along_axis(x, idx, axis=2) for x in self.v)
        valid = jnp.arange(self.size)[None, :] < count[:, None]
        return self.replace(k=k, v=v, valid=valid, end=count.max().astype(self.end.dtype))

    @classmethod
    def zeros(cls, cfg: ModelConfig, batch: int, size: int, *, stacked: bool = False) -> "KVCache":
        shape = (batch, cfg.n_kv_heads, size, cfg.head_dim)
        dt = _dtype(cfg.dtype)
        if stacked:
            k = jnp.zeros((cfg.n_layers,) + shape, dt)
            v = jnp.zeros((cfg.n_layers,) + shape, dt)
        else:
            k = tuple(jnp.zeros(shape, dt) for _ in range(cfg.n_layers))
            v = tuple(jnp.zeros(shape, dt) for _ in range(cfg.n_layers))
        return cls(k=k, v=v, valid=jnp.zeros((batch, size), bool), end=jnp.zeros((), jnp.int32))


#: Query rows per block of :func:`causal_attention` (the training and scoring forward; the cached decode
#: attends with :func:`attention_core`). 0: one block.
CAUSAL_BLOCK = 128


def causal_attention(q, k, v, mask, block: int | None = None):
    """:func:`attention_core` for a causal ``mask`` [b, t, s] whose last ``t`` keys are the queries'
    own (the first ``s - t``, a shared prefix, are visible to every query), by blocks of ``block``
    queries: a block's queries see no key past its last query's, so each block attends only to the
    keys up to there, and the masked upper triangle of the scores is mostly never computed (at
    t = 384, 3 blocks: 2/3 of the scores). ``block`` None: :data:`CAUSAL_BLOCK`. Every key a block
    skips has a masked score in every one of its rows, so a row with any visible key gets the same
    softmax (its masked scores weigh exactly 0); a row with none (a query before a left-padded row's
    first real token) attends uniformly to the keys its block keeps instead of to all: that
    position's output differs, and no real position reads it (its key is masked too)."""
    block = CAUSAL_BLOCK if block is None else block  # read at trace time (tests set it small)
    t, s = q.shape[1], k.shape[2]
    if block <= 0 or t <= block:
        return attention_core(q, k, v, mask)
    off = s - t
    outs = []
    for start in range(0, t, block):
        stop = min(start + block, t)
        outs.append(attention_core(q[:, start:stop], k[:, :, :off + stop], v[:, :, :off + stop],
                                   mask[:, start:stop, :off + stop]))
    return jnp.concatenate(outs, axis=1)


def attention_core(q, k, v, mask):
    """q [b,t,h,e], k/v [b,k,s,e], mask [b,t,s] -> [b,t,h,e]; fp32 softmax.

    Query head h uses kv head h // (h/k) (HF's repeat_kv order)."""
    b, t, h, e = q.shape
    kh = k.shape[1]
    g = h // kh
    q = q.reshape(b, t, kh, g, e).transpose(0, 2, 3, 1, 4).reshape(b, kh, g * t, e)
    scores = jnp.einsum("bkqe,bkse->bkqs", q, k, preferred_element_type=jnp.float32)
    scores = scores.reshape(b, kh, g, t, -1) / math.sqrt(e)
    scores = jnp.where(mask[:, None, None], scores, _NEG)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype).reshape(b, kh, g * t, -1)
    out = jnp.einsum("bkqs,bkse->bkqe", probs, v)
    return out.reshape(b, kh, g, t, e).transpose(0, 3, 1, 2, 4).reshape(b, t, h, e)


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        pd = _dtype(cfg.param_dtype)
        d, h, k, e = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.q_proj = _param(rngs, (d, h, e), ("embed", "heads", "head_dim"), pd)
        self.k_proj = _param(rngs, (d, k, e), ("embed", "kv_heads", "head_dim"), pd)
        self.v_proj = _param(rngs, (d, k, e), ("embed", "kv_heads", "head_dim"), pd)
        self.o_proj = _param(rngs, (h, e, d), ("heads", "head_dim", "embed"), pd)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(e, cfg.rms_norm_eps, "norm", pd, rngs=rngs)
            self.k_norm = RMSNorm(e, cfg.rms_norm_eps, "norm", pd, rngs=rngs)
        else:
            self.q_norm = None
            self.k_norm = None
        self.cfg = cfg
        self.dtype = _dtype(cfg.dtype)

    def qkv(self, x, positions):
        dt = self.dtype
        q = dense(x, self.q_proj[...].astype(dt))
        k = dense(x, self.k_proj[...].astype(dt))
        v = dense(x, self.v_proj[...].astype(dt))
        if self.q_norm is not None:
            q = self.q_norm(q)
            k = self.k_norm(k)
        inv_freq = rope_inv_freq(self.cfg)  # a trace-time constant, not state
        q = apply_rope(q, positions, inv_freq)
        k = apply_rope(k, positions, inv_freq)
        q = constrain(q, ("act_batch", "act_seq", "act_heads", None))
        k = constrain(k.transpose(0, 2, 1, 3), ("act_batch", "act_kv_heads", "act_seq", None))
        v = constrain(v.transpose(0, 2, 1, 3), ("act_batch", "act_kv_heads", "act_seq", None))
        return q, k, v  # q [b,t,h,e]; k, v [b,k,t,e]

    def out(self, o):
        y = dense(o, self.o_proj[...].astype(self.dtype), n_in=2)
        return constrain(y, ("act_batch", "act_seq", "act_embed"))


class MLP(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        pd = _dtype(cfg.param_dtype)
        self.gate_proj = _param(rngs, (cfg.d_model, cfg.ffn_dim), ("embed", "mlp"), pd)
        self.up_proj = _param(rngs, (cfg.d_model, cfg.ffn_dim), ("embed", "mlp"), pd)
        self.down_proj = _param(rngs, (cfg.ffn_dim, cfg.d_model), ("mlp", "embed"), pd)
        self.dtype = _dtype(cfg.dtype)

    def __call__(self, x):
        dt = self.dtype
        g = dense(x, self.gate_proj[...].astype(dt))
        u = dense(x, self.up_proj[...].astype(dt))
        hdn = constrain(jax.nn.silu(g) * u, ("act_batch", "act_seq", "act_mlp"))
        y = dense(hdn, self.down_proj[...].astype(dt))
        return constrain(y, ("act_batch", "act_seq", "act_embed"))


class Block(nnx.Module):
    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        pd = _dtype(cfg.param_dtype)
        self.input_norm = RMSNorm(cfg.d_model, cfg.rms_norm_eps, "norm", pd, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.post_attn_norm = RMSNorm(cfg.d_model, cfg.rms_norm_eps, "norm", pd, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, x, positions, mask):
        """One layer's forward over x [b, t, d] (no cache)."""
        q, k, v = self.attn.qkv(self.input_norm(x), positions)
        return self._rest(x, causal_attention(q, k, v, mask))

    def cached(self, x, positions, mask, kc, vc, end, layer=None):
        """The forward with a KV cache; the new keys and values are written at slot ``end``.
        ``layer=None``: kc/vc are this layer's own buffers [b, k, s, e]; else they are every layer's
        stacked buffers [l, b, k, s, e] and ``layer`` (a traced index in a scan) picks this one's.
        Returns (x, kc, vc)."""
        q, k, v = self.attn.qkv(self.input_norm(x), positions)
        if layer is None:
            kc = jax.lax.dynamic_update_slice_in_dim(kc, k.astype(kc.dtype), end, axis=2)
            vc = jax.lax.dynamic_update_slice_in_dim(vc, v.astype(vc.dtype), end, axis=2)
            k_read, v_read = kc, vc
        else:
            kc = jax.lax.dynamic_update_slice(kc, k[None].astype(kc.dtype), (layer, 0, 0, end, 0))
            vc = jax.lax.dynamic_update_slice(vc, v[None].astype(vc.dtype), (layer, 0, 0, end, 0))
            k_read, v_read = kc[layer], vc[layer]
        return self._rest(x, attention_core(q, k_read, v_read, mask)), kc, vc

    def with_prefix(self, xp, x, pos_p, pos, mask_p, mask, group: int, prefix_out: bool = True):
        """One layer over a shared prefix ``xp`` [n, c, d] and its continuations ``x`` [n * group, t, d]
        (rows ``i * group ..`` continue prefix ``i``): the prefix's keys and values are computed once
        per prefix and repeated to its rows, which attend to them before their own (``mask``
        [n * group, t, c + t]). Returns (xp, x) after the layer. ``prefix_out=False`` (the last layer:
        nothing reads the prefix's output) leaves ``xp`` as it was and skips its query, attention, output
        projection and MLP, which inside a ``lax.scan`` XLA could not remove as dead code."""
        qp, kp, vp = self.attn.qkv(self.input_norm(xp), pos_p)  # qp unused when not prefix_out: dropped
        q, k, v = self.attn.qkv(self.input_norm(x), pos)
        x = self._rest(x, causal_attention(q, jnp.concatenate([jnp.repeat(kp, group, axis=0), k], axis=2),
                                           jnp.concatenate([jnp.repeat(vp, group, axis=0), v], axis=2), mask))
        if prefix_out:
            xp = self._rest(xp, causal_attention(qp, kp, vp, mask_p))
        return xp, x

    def _rest(self, x, attended):
        x = x + self.attn.out(attended)
        return x + self.mlp(self.post_attn_norm(x))


def stacked_blocks(cfg: ModelConfig, rngs: nnx.Rngs) -> Block:
    """``cfg.n_layers`` decoder layers as one :class:`Block` whose parameters carry a leading layer axis
    ("layers"). The layers are initialised one after another from ``rngs`` (the same values as a list
    of separately built layers), then stacked."""
    blocks = [Block(cfg, rngs=rngs) for _ in range(cfg.n_layers)]
    graphdef, _ = nnx.split(blocks[0])
    is_var = lambda x: isinstance(x, nnx.Variable)  # noqa: E731
    stacked = jax.tree.map(lambda *vs: vs[0].replace(jnp.stack([v[...] for v in vs]),
                                                     logical_axes=("layers",) + tuple(vs[0].get_metadata()["logical_axes"])),
                           *[nnx.state(b) for b in blocks], is_leaf=is_var)
    return nnx.merge(graphdef, stacked)


class Transformer(nnx.Module):
    """Decoder-only LM; `__call__` returns fp32 logits [batch, seq, vocab]."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        pd = _dtype(cfg.param_dtype)
        self.embed = _param(rngs, (cfg.vocab_size, cfg.d_model), ("vocab", "embed"), pd)
        self.layers = stacked_blocks(cfg, rngs)  # one Block, weights [n_layers, ...]
        self.final_norm = RMSNorm(cfg.d_model, cfg.rms_norm_eps, "norm", pd, rngs=rngs)
        if cfg.tie_embeddings:
            self.lm_head = None
        else:
            self.lm_head = _param(rngs, (cfg.d_model, cfg.vocab_size), ("embed", "vocab"), pd)
        self.dtype = _dtype(cfg.dtype)

    # -- pieces
    def _embed(self, ids):
        # vocab shards gathered first (the table stays split over fsdp: V x d/fsdp per device), the
        # rows looked up per data shard, then one all-to-all into the activation layout
        table = constrain(self.embed[...], (None, "embed"))
        x = jnp.take(table, ids, axis=0).astype(self.dtype)
        x = constrain(x, ("act_lookup_batch", "act_seq", "act_lookup_embed"))
        return constrain(x, ("act_batch", "act_seq", "act_embed"))

    def logits_of(self, x):
        """fp32 logits [b, t, v] of hidden states [b, t, d] (``decode(..., hidden=True)``)."""
        return self._logits(x)

    def _logits(self, x):
        x = self.final_norm(x)
        if self.lm_head is None:
            logits = dense(x, self.embed[...].astype(self.dtype).T, preferred_element_type=jnp.float32)
        else:
            logits = dense(x, self.lm_head[...].astype(self.dtype), preferred_element_type=jnp.float32)
        return constrain(logits.astype(jnp.float32), ("act_batch", "act_seq", "act_vocab"))

    def target_scores(self, x, targets, chunk: int, temperature: float | jax.Array = 1.0):
        """``(log p(targets), targets == argmax)`` [b, t] (at ``temperature``) from the final layer's hidden
        states ``x`` [b, t, d], ``chunk`` positions at a time: the head's fp32 logits exist for one chunk only
        ([b, chunk, v], not [b, t, v]; one micro-batch of a Qwen3 GRPO step is tens of GB of them),
        and the backward recomputes each chunk's logits (``jax.checkpoint``) instead of keeping them.
        The same values as :func:`token_log_probs` on the whole sequence's logits."""
        b, t, d = x.shape
        n = -(-t // chunk)
        pad = n * chunk - t
        xs = jnp.pad(x, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk, d).swapaxes(0, 1)
        ts = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, chunk).swapaxes(0, 1)

        @jax.checkpoint
        def one(args):
            xc, tc = args
            logits = self._logits(xc)
            return token_log_probs(logits, tc, temperature), (jnp.argmax(logits, axis=-1) == tc)

        logp, top1 = jax.lax.map(one, (xs, ts))
        unchunk = lambda a: a.swapaxes(0, 1).reshape(b, n * chunk)[:, :t]  # noqa: E731
        return unchunk(logp), unchunk(top1)

    # -- training / scoring forward
    def __call__(self, input_ids, *, positions=None, attention_mask=None, remat: bool = False,
                 hidden: bool = False, scan: bool = False, prefix=None, segment_ids=None):
        """input_ids [b, t] ints; attention_mask [b, t] (1 = real token) for padded rows.

        Positions default to the count of real tokens before each slot, so a left-padded
        row gets the same logits as the unpadded one. ``remat``: each layer is rematerialised
        (``jax.checkpoint``) so a backward pass keeps only the layers' inputs, not their intermediates
        (attention scores, MLP activations), and recomputes the rest: the same values, less memory,
        about one more forward of compute (what a train step at real scale needs). ``hidden``: return
        the last layer's hidden states [b, t, d] instead of the logits (for :meth:`target_scores`).
        ``scan``: the layers run as one ``lax.scan`` over their stacked weights: one compiled layer
        body whatever the depth, and with ``remat`` a backward that keeps one layer's input per
        layer, which no compiler pass can undo. Without it the layers are unrolled (one copy of the
        layer in the program per layer: faster to run for a few layers on the CPU, slower to compile).
        ``prefix``: ids [n, c] (every slot real) that rows ``i * g .. i * g + g - 1`` of ``input_ids``
        (``g = b / n``) continue: GRPO's G rollouts of one prompt. The prefix runs once per group, not
        once per row, and the result is each row's continuation only: the values the rows
        ``concat(prefix[i], input_ids[r])`` would get at their last ``t`` slots (default positions
        count on from ``c``; given ``positions`` are the rows' own, the prefix's being ``0 .. c - 1``).
        ``segment_ids``: ints [b, t] for packed rows (several sequences a row, numbered from 1, 0 for
        padding; :func:`cocoda_jax.rl.trajectory.pack_episodes`): a token attends only within its own
        segment and default positions count from the segment's start, so each sequence gets the
        logits it would get alone. Not with ``prefix``.
        """
        input_ids = jnp.asarray(input_ids)
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [batch, seq], got shape {input_ids.shape}")
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = jnp.ones((b, t), bool)
        attention_mask = jnp.asarray(attention_mask).astype(bool)
        causal = jnp.tril(jnp.ones((t, t), bool))
        mask = causal[None] & attention_mask[:, None, :]
        if segment_ids is not None:
            if prefix is not None:
                raise ValueError("segment_ids (packed rows) and a shared prefix do not combine")
            segment_ids = jnp.asarray(segment_ids)
            mask = mask & (segment_ids[:, :, None] == segment_ids[:, None, :]) & (segment_ids > 0)[:, None, :]
            if positions is None:
                positions = segment_positions(segment_ids)
        if positions is None:
            positions = jnp.maximum(jnp.cumsum(attention_mask, axis=1) - 1, 0)
            if prefix is not None:
                positions = positions + jnp.shape(prefix)[-1]
        if prefix is not None:
            return self._with_prefix(jnp.asarray(prefix), input_ids, positions, mask, remat=remat, hidden=hidden,
                                     scan=scan)
        graphdef, state = nnx.split(self.layers)

        def layer(st, x):  # a pure function of one layer's state: nests in scan, grad and checkpoint
            return nnx.merge(graphdef, st)(x, positions, mask)

        if remat:
            layer = jax.checkpoint(layer)
        x = self._embed(input_ids)
        if scan:
            x = jax.lax.scan(lambda x, st: (layer(st, x), None), x, state)[0]
        else:
            for i in range(self.cfg.n_layers):
                x = layer(layer_state(state, i), x)
        return x if hidden else self._logits(x)

    def _with_prefix(self, prefix, input_ids, positions, mask, *, remat, hidden, scan):
        """:meth:`__call__` of continuations ``input_ids`` [n * g, t] of a shared ``prefix`` [n, c]."""
        if prefix.ndim != 2 or prefix.shape[1] < 1:
            raise ValueError(f"prefix must be [groups, length >= 1], got shape {prefix.shape}")
        (n, c), (b, t) = prefix.shape, input_ids.shape
        if b % n:
            raise ValueError(f"{b} rows do not continue {n} prefixes in equal groups")
        group = b // n
        pos_p = jnp.broadcast_to(jnp.arange(c), (n, c))
        mask_p = jnp.broadcast_to(jnp.tril(jnp.ones((c, c), bool)), (n, c, c))
        mask = jnp.concatenate([jnp.ones((b, t, c), bool), mask], axis=2)
        graphdef, state = nnx.split(self.layers)

        def layer(st, carry, prefix_out=True):
            return nnx.merge(graphdef, st).with_prefix(*carry, pos_p, positions, mask_p, mask, group, prefix_out)

        if remat:
            layer = jax.checkpoint(layer, static_argnums=(2,))
        carry = (self._embed(prefix), self._embed(input_ids))
        last = self.cfg.n_layers - 1
        if scan and last > 0:  # every layer but the last as one scan; the last without the prefix's output
            carry = jax.lax.scan(lambda carry, st: (layer(st, carry, True), None), carry,
                                 jax.tree.map(lambda w: w[:last], state))[0]
            carry = layer(layer_state(state, last), carry, False)
        else:
            for i in range(self.cfg.n_layers):
                carry = layer(layer_state(state, i), carry, i < last)
        return carry[1] if hidden else self._logits(carry[1])

    # -- cached forward
    def decode(self, tokens, positions, token_mask, cache: KVCache, *, scan: bool = False,
               layers: tuple | None = None, hidden: bool = False):
        """Appends tokens [b, t] (positions [b, t], token_mask [b, t]) at slot cache.end.

        Returns fp32 logits [b, t, v] and the updated cache. Each query attends to every
        valid slot up to its own; masked tokens are written but never attended to. ``scan``: the
        layers as one ``lax.scan`` carrying the whole cache (as in :meth:`__call__`). ``layers``
        (unrolled decode only): the layers' states already sliced out of the stacked weights
        (:meth:`layer_states`), so a decode loop slices them once, before the loop, not per token.
        ``hidden``: the last layer's hidden states [b, t, d] instead of the logits (a prefill needs
        the logits of one position per row: :meth:`logits_of`).
        """
        b, t = tokens.shape
        s = cache.size
        end = cache.end
        valid = jax.lax.dynamic_update_slice_in_dim(cache.valid, token_mask.astype(bool), end, axis=1)
        q_slot = end + jnp.arange(t)
        mask = valid[:, None, :] & (jnp.arange(s)[None, None, :] <= q_slot[None, :, None])
        graphdef, state = nnx.split(self.layers)
        if layers is not None and (scan or len(layers) != self.cfg.n_layers):
            raise ValueError(f"sliced layer states are for the unrolled decode of {self.cfg.n_layers} layers, "
                             f"got {len(layers)} with scan={scan}")
        if layers is None and not scan:
            layers = tuple(layer_state(state, i) for i in range(self.cfg.n_layers))

        def layer(st, x, kc, vc, i=None):
            return nnx.merge(graphdef, st).cached(x, positions, mask, kc, vc, end, i)

        x = self._embed(tokens)
        if scan:
            if not cache.stacked:
                raise ValueError("a scanned decode needs a stacked KVCache (KVCache.zeros(..., stacked=True))")
            def body(carry, xs):
                return layer(xs[0], *carry, xs[1]), None
            (x, ks, vs), _ = jax.lax.scan(body, (x, cache.k, cache.v),
                                          (state, jnp.arange(self.cfg.n_layers, dtype=jnp.int32)))
        elif cache.stacked:
            ks, vs = cache.k, cache.v
            for i in range(self.cfg.n_layers):
                x, ks, vs = layer(layers[i], x, ks, vs, i)
        else:  # one buffer per layer, each updated in place
            ks, vs = [], []
            for i in range(self.cfg.n_layers):
                x, kc, vc = layer(layers[i], x, cache.k[i], cache.v[i])
                ks.append(kc)
                vs.append(vc)
            ks, vs = tuple(ks), tuple(vs)
        return (x if hidden else self._logits(x)), KVCache(k=ks, v=vs, valid=valid, end=end + t)

    def layer_states(self) -> tuple:
        """Each layer's state, sliced out of the stacked weights (for :meth:`decode`'s ``layers``)."""
        state = nnx.state(self.layers)
        return tuple(layer_state(state, i) for i in range(self.cfg.n_layers))


# ------------------------------------------------------------------------ helpers
def layer_state(stacked: nnx.State, i: int) -> nnx.State:
    """Layer ``i``'s slice of the stacked layers' state (a static index: a contiguous slice)."""
    return jax.tree.map(lambda a: a[i], stacked)


def segment_positions(segment_ids: jnp.ndarray) -> jnp.ndarray:
    """Per slot of packed rows [b, t], its offset from the start of its run of equal segment ids
    (a new run starts at column 0 and wherever the id changes)."""
    idx = jnp.broadcast_to(jnp.arange(segment_ids.shape[1]), segment_ids.shape)
    changed = jnp.concatenate([jnp.ones_like(segment_ids[:, :1], bool),
                               segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1)
    return idx - jax.lax.cummax(jnp.where(changed, idx, 0), axis=1)


def token_log_probs(logits: jnp.ndarray, targets: jnp.ndarray, temperature: float | jax.Array = 1.0) -> jnp.ndarray:
    """fp32 log p(targets) under logits [b, t, v] divided by ``temperature`` (may be traced); targets [b, t]."""
    lp = jax.nn.log_softmax(logits.astype(jnp.float32) / temperature, axis=-1)
    return jnp.take_along_axis(lp, targets[..., None], axis=-1)[..., 0]


def param_axes(model_or_state) -> dict:
    """Nested pure dict: parameter path -> logical axis names."""
    state = model_or_state if isinstance(model_or_state, nnx.State) else nnx.state(model_or_state)
    return nnx.to_pure_dict(jax.tree.map(lambda v: v.get_metadata()["logical_axes"], state,
                                         is_leaf=lambda x: isinstance(x, nnx.Variable)))


def state_shardings(abs_state: nnx.State, mesh) -> dict:
    """Pure dict of NamedShardings for an (abstract) model state on `mesh` (sharding.param_shardings)."""
    return nnx.to_pure_dict(param_shardings(abs_state, mesh))


def create_model(cfg: ModelConfig, *, seed: int = 0, mesh=None) -> Transformer:
    """Random-init model, initialised under jit. With `mesh`, parameters are created
    directly sharded (never a full copy on one device): eval_shape for the structure,
    then a jit whose out_shardings are the logical-axis shardings."""
    def make():
        return Transformer(cfg, rngs=nnx.Rngs(seed))
    abs_model = nnx.eval_shape(make)
    graphdef, abs_state = nnx.split(abs_model)
    shardings = None if mesh is None else state_shardings(abs_state, mesh)

    def init():
        return nnx.to_pure_dict(nnx.state(make()))

    init = jax.jit(init, out_shardings=shardings)
    if mesh is None:
        pure = init()
    else:
        with jax.set_mesh(mesh):
            pure = init()
    nnx.replace_by_pure_dict(abs_state, pure)
    return nnx.merge(graphdef, abs_state)


def abstract_model(cfg: ModelConfig) -> Transformer:
    return nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0)))
