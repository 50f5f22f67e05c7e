"""Benchmark: one GRPO iteration of this project vs TRL's `GRPOTrainer` and tunix's `GRPOLearner`.

An iteration is: G rollouts per prompt through the sampler, a reward per rollout, group advantages,
the reference log-probs (KL term), the clipped loss, its gradient and one AdamW update. The peers
start from the same tiny Qwen3 (the `tiny` preset's shape with Qwen3's RoPE base, random weights
built in PyTorch and saved as an HF directory with a word-level tokenizer) and get the same prompts,
G, max new tokens, sampling temperature, learning rate, gradient clip, epsilon and beta:

* ours: `Sampler.generate` -> reward -> `grpo.compute_advantages` -> `Learner.log_probs` (reference)
  -> `Learner.grpo_step` (the project's own jitted step; nothing re-implemented here);
* TRL: `GRPOTrainer.train()` on CPU with its own `generate()`, no logging, reporting or saving;
* tunix (when importable): `GRPOLearner` with the vanilla rollout, all roles on one CPU device.

Loss settings (chosen so that all compute the same number): our default `token_mean` aggregation
is TRL's `loss_type="dapo"` (one process, no accumulation: the token sum over the batch divided by
its token count; TRL's default) and tunix's `token-mean`; the advantages are the group-centred
rewards *not* divided by the std (ours `normalize_std=False`, TRL `scale_rewards="none"`, tunix
`drgrpo`), because the std-scaled variants differ by construction (TRL and tunix: Bessel-corrected
std + 1e-4 / 1e-6, ours: population std + 1e-6).

The loss check: the warm-up iteration's rollouts (prompt and completion ids, rewards, advantages,
the sampler's log-probs as the old policy's and our reference log-probs) are fed unchanged to TRL's
own `GRPOTrainer._compute_loss` (its torch forward on the same initial weights) and to tunix's
registered `grpo` policy loss (its forward), and compared with the loss our first `grpo_step`
reported: `loss_equal_within` is the largest absolute difference.

    python -m launch.bench.grpo [--prompts=4 --group_size=8 --prompt_len=32 --max_new_tokens=32]
                                [--iterations=5 --warmup=1] [--notunix] [--json_out=PATH]

Prints JSON: ours_s_per_iter, trl_s_per_iter, tunix_s_per_iter (null with
`tunix_unavailable_reason` when tunix cannot run beside this project), ratio_vs_trl
(trl / ours), ratio_vs_tunix, tokens_per_iter (prompts x G x max new tokens), loss_equal_within,
plus each peer's first loss, the settings, every timed iteration and the thread counts. Seconds per
iteration are medians of the timed iterations (the warm-up ones excluded). Our timed iterations run
interleaved with each peer's (one of ours at each of its iteration boundaries, left out of its time),
so that on a shared machine each ratio compares iterations that saw the same load.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence

import numpy as np
from absl import app, flags
from cocoda_jax.runs import host_memory
from launch.output import emit_json

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
FIRST_WORD_ID = 3  # ids below are the tokenizer's special tokens; prompts never use them
RESULT_KEYS = ("ours_s_per_iter", "trl_s_per_iter", "tunix_s_per_iter", "ratio_vs_trl", "ratio_vs_tunix",
               "tokens_per_iter", "loss_equal_within")


def _define_flags():
    """Defined only when run as a program, so importing this module (tests) adds no global flags
    that could clash with other launchers' `--seed` / `--json_out`."""
    flags.DEFINE_integer("prompts", 4, "prompts per iteration")
    flags.DEFINE_integer("group_size", 8, "G: rollouts per prompt")
    flags.DEFINE_integer("prompt_len", 32, "tokens per prompt")
    flags.DEFINE_integer("max_new_tokens", 32, "max completion tokens per rollout")
    flags.DEFINE_integer("vocab_size", 1024, "vocabulary of the tiny model (word-level tokenizer)")
    flags.DEFINE_integer("iterations", 5, "timed iterations of each peer (after the warm-up)")
    flags.DEFINE_integer("warmup", 1, "untimed first iterations of each peer (compilation, allocation)")
    flags.DEFINE_float("beta", 0.01, "KL coefficient (k3 estimator, reference = the initial weights)")
    flags.DEFINE_float("epsilon", 0.2, "clip epsilon (symmetric)")
    flags.DEFINE_float("learning_rate", 1e-5, "AdamW learning rate (constant), gradient clip 1.0 in every peer")
    flags.DEFINE_integer("seed", 0, "weights, prompts and sampling seed")
    flags.DEFINE_integer("torch_threads", 0, "torch intra-op threads (0: one per core)")
    flags.DEFINE_bool("tunix", True, "try google-tunix's GRPO learner as a third peer")
    flags.DEFINE_bool("share_prefix", True, "ours: each group's prompt through the model once (the loop's path); "
                      "--noshare_prefix: once per rollout, as the peers do")
    flags.DEFINE_integer("host_shards", 1, "ours: the rollout rows in this many slices of whole groups, each generated "
                         "from its own host thread (the loop's rollout.host_shards)")
    flags.DEFINE_string("json_out", None, "also write the JSON here")


F = flags.FLAGS


# ------------------------------------------------------------------------------------------------
# Pure helpers (tested without torch or TRL)
# ------------------------------------------------------------------------------------------------


def make_prompts(n: int, length: int, vocab_size: int, seed: int) -> list[list[int]]:
    """``n`` prompts of ``length`` word ids (never a special token), reproducible from ``seed``."""
    rng = np.random.RandomState(seed)
    return rng.randint(FIRST_WORD_ID, vocab_size, (n, length)).tolist()


def ids_to_text(ids: Sequence[int]) -> str:
    """The text the word-level tokenizer maps back to exactly ``ids`` (TRL takes text prompts)."""
    return " ".join(f"t{int(i)}" for i in ids)


def reward_from_ids(completion_ids: Sequence[int]) -> float:
    """A deterministic, dense reward on a completion's word ids: the share of even ids (so the G
    rollouts of a prompt rarely tie). Special tokens (the closing EOS) are left out, so a peer that
    hands the reward decoded text (tunix) scores exactly what one that hands ids does."""
    words = [int(i) for i in completion_ids if int(i) >= FIRST_WORD_ID]
    return float(np.mean([i % 2 == 0 for i in words])) if words else 0.0


def trl_formula_loss(logp: np.ndarray, old_logp: np.ndarray, ref_logp: np.ndarray | None, rewards: np.ndarray,
                     mask: np.ndarray, group_size: int, *, beta: float, epsilon_low: float, epsilon_high: float,
                     scale_rewards: str = "none", loss_type: str = "dapo") -> float:
    """TRL's documented GRPO loss (one process, no accumulation) in numpy, from the rewards on.

    Advantages ``r - mean_group`` (divided by the Bessel std + 1e-4 when ``scale_rewards="group"``);
    per token ``-min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) + beta * k3`` with
    ``rho = exp(logp - old_logp)`` and ``k3 = exp(ref - logp) - (ref - logp) - 1``; aggregated over
    tokens (``dapo``/``bnpo``: sum / token count) or per sequence then averaged (``grpo``). Written
    from the formula, so the test can hold our registry to it without TRL installed.
    """
    logp, old_logp, mask = (np.asarray(x, np.float64) for x in (logp, old_logp, mask))
    grouped = np.asarray(rewards, np.float64).reshape(-1, group_size)
    adv = grouped - grouped.mean(axis=1, keepdims=True)
    if scale_rewards == "group":
        adv = adv / (grouped.std(axis=1, ddof=1, keepdims=True) + 1e-4)
    elif scale_rewards != "none":
        raise ValueError(f"scale_rewards must be 'none' or 'group', got {scale_rewards!r}")
    adv = adv.reshape(-1, 1)
    rho = np.exp(logp - old_logp)
    per_token = -np.minimum(rho * adv, np.clip(rho, 1 - epsilon_low, 1 + epsilon_high) * adv)
    if beta:
        d = np.asarray(ref_logp, np.float64) - logp
        per_token = per_token + beta * (np.exp(d) - d - 1)
    if loss_type in ("dapo", "bnpo"):
        return float((per_token * mask).sum() / max(mask.sum(), 1.0))
    if loss_type == "grpo":
        return float(((per_token * mask).sum(-1) / np.maximum(mask.sum(-1), 1.0)).mean())
    raise ValueError(f"loss_type must be 'dapo', 'bnpo' or 'grpo', got {loss_type!r}")


def rollout_columns(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                    completion_logp: Sequence[Sequence[float]], max_new_tokens: int) -> dict[str, np.ndarray]:
    """Equal-length prompts and right-padded completions as arrays: the layout TRL's
    ``_compute_loss`` takes (``prompt_ids``, ``completion_ids``, masks, ``old_logp`` per completion
    token) and, concatenated, our learner's ``tokens``/``valid``/``loss_mask``/``old_logp``."""
    b = len(prompts)
    if len(completions) != b or len({len(p) for p in prompts}) != 1:
        raise ValueError("one completion per prompt, all prompts of one length")
    p = len(prompts[0])
    comp = np.full((b, max_new_tokens), PAD_ID, np.int32)
    cmask = np.zeros((b, max_new_tokens), np.float32)
    old = np.zeros((b, max_new_tokens), np.float32)
    for i, (c, lp) in enumerate(zip(completions, completion_logp)):
        n = len(c)
        if n > max_new_tokens:
            raise ValueError(f"completion {i} has {n} tokens, more than {max_new_tokens}")
        comp[i, :n], cmask[i, :n], old[i, :n] = c, 1.0, np.asarray(lp, np.float32)[:n]
    prompt_ids = np.asarray(prompts, np.int32)
    tokens = np.concatenate([prompt_ids, comp], axis=1)
    valid = np.concatenate([np.ones((b, p), bool), cmask > 0], axis=1)
    loss_mask = np.concatenate([np.zeros((b, p), np.float32), cmask], axis=1)
    old_full = np.concatenate([np.zeros((b, p), np.float32), old], axis=1)
    return {"prompt_ids": prompt_ids, "completion_ids": comp, "completion_mask": cmask, "completion_old_logp": old,
            "tokens": tokens, "valid": valid, "loss_mask": loss_mask, "old_logp": old_full}


def paired_seconds(marks: Sequence[float], resumes: Sequence[float], start: int, count: int) -> list[float]:
    """A peer's iteration durations when our iterations are interleaved at its iteration marks:
    mark ``k`` is taken when the peer reaches the same point of iteration ``k``, ``resumes[k]`` when
    it gets the machine back after our interleaved iteration, so ``marks[k + 1] - resumes[k]`` is its
    own iteration ``k + 1`` (ours left out), for ``k = start .. start + count - 1``."""
    if start < 0 or len(marks) < start + count + 1 or len(resumes) < start + count:
        raise ValueError(f"{len(marks)} marks / {len(resumes)} resumes do not cover {count} iterations from {start}")
    return [marks[k + 1] - resumes[k] for k in range(start, start + count)]


def typical(durations: Sequence[float]) -> float:
    """The median duration: on a shared machine a burst of someone else's load lengthens a few
    iterations of one peer; the median keeps them from deciding the ratio (the mean is reported too)."""
    if not durations:
        raise ValueError("no timed iterations")
    return float(np.median(np.asarray(durations, np.float64)))


def summarize(ours_s: float, trl_s: float | None, tunix: float | str | None, tokens_per_iter: int,
              loss_diff: float | None, *, ours_beside_trl_s: float | None = None,
              ours_beside_tunix_s: float | None = None, **extra) -> dict:
    """The result JSON: the issue's keys first (a peer that did not run is ``null``, and tunix's
    reason string goes to ``tunix_unavailable_reason``), then ``extra``. Ratios are peer seconds /
    our seconds (> 1: ours is faster), ours being those measured interleaved with that peer when
    given (``ours_beside_*_s``), else ``ours_s``."""
    tunix_s = tunix if isinstance(tunix, float) else None
    vs_trl = ours_s if ours_beside_trl_s is None else ours_beside_trl_s
    vs_tunix = ours_s if ours_beside_tunix_s is None else ours_beside_tunix_s
    out = {
        "ours_s_per_iter": ours_s,
        "trl_s_per_iter": trl_s,
        "tunix_s_per_iter": tunix_s,
        "ratio_vs_trl": None if trl_s is None else trl_s / vs_trl,
        "ratio_vs_tunix": None if tunix_s is None else tunix_s / vs_tunix,
        "tokens_per_iter": tokens_per_iter,
        "loss_equal_within": loss_diff,
    }
    if isinstance(tunix, str):
        out["tunix_unavailable_reason"] = tunix
    beside = (("trl", ours_beside_trl_s), ("tunix", ours_beside_tunix_s))
    out.update({f"ours_beside_{k}_s_per_iter": v for k, v in beside if v is not None})
    out.update(extra)
    return out


# ------------------------------------------------------------------------------------------------
# The shared model, tokenizer and prompts
# ------------------------------------------------------------------------------------------------


def _word_tokenizer(vocab_size: int):
    """A word-level fast tokenizer: ``t<id>`` <-> id, so text prompts map to exactly our ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": PAD_ID, "<eos>": EOS_ID, "<unk>": UNK_ID}
    vocab.update({f"t{i}": i for i in range(FIRST_WORD_ID, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def bench_model_config(vocab_size: int):
    """The ``tiny`` preset's shape with Qwen3's own RoPE base (1e6, not the preset's 1e4): tunix 0.1.7's
    Qwen3 attention calls ``apply_rope`` without the config's ``rope_theta`` (its default is 1e6), so
    at 1e4 it would score the same weights as a different model."""
    from cocoda_jax.models import get_preset

    return get_preset("tiny").replace(vocab_size=vocab_size, rope_theta=1_000_000.0)


def write_hf_dir(path: str, vocab_size: int, seed: int):
    """The tiny Qwen3 with seeded random weights and its tokenizer, as an HF directory."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = bench_model_config(vocab_size)
    hf_cfg = Qwen3Config(**{k: v for k, v in cfg.to_hf_config().items()
                            if k not in ("architectures", "model_type", "dtype")})
    hf_cfg.pad_token_id, hf_cfg.eos_token_id, hf_cfg.bos_token_id = PAD_ID, EOS_ID, None
    torch.manual_seed(seed)
    Qwen3ForCausalLM(hf_cfg).save_pretrained(path)
    tok = _word_tokenizer(vocab_size)
    tok.save_pretrained(path)
    return cfg, tok


# ------------------------------------------------------------------------------------------------
# Ours
# ------------------------------------------------------------------------------------------------


class Ours:
    """The project's GRPO iteration on the HF directory's weights: the sampler, the registered
    advantage and loss, the learner's jitted step."""

    def __init__(self, hf_dir: str, *, group_size: int, max_new_tokens: int, beta: float, epsilon: float,
                 learning_rate: float, seed: int, share_prefix: bool = True, host_shards: int = 1):
        import jax
        from flax import nnx

        from cocoda_jax.models import load_hf_checkpoint
        from cocoda_jax.models.sampler import Sampler, SamplingParams, bucket_size
        from cocoda_jax.rl import grpo as G
        from cocoda_jax.rl.learner import Learner, LearnerConfig
        from cocoda_jax.rl.update import OptimConfig

        model = load_hf_checkpoint(hf_dir)
        self.grpo = G.GRPOConfig(epsilon=epsilon, beta=beta, aggregation="token_mean", normalize_std=False)
        self.learner = Learner(model, LearnerConfig(optim=OptimConfig(learning_rate=learning_rate, clip_norm=1.0),
                                                    grpo=self.grpo))
        self.state = self.learner.init_state()
        self.ref = nnx.split(model)[1] if beta > 0 else None  # the constructor's model stays valid: frozen ref
        self._make_sampler = lambda m, prompt_len: Sampler(m, cache_size=bucket_size(prompt_len) + max_new_tokens,
                                                           pad_id=PAD_ID)
        self.params = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, stop_tokens=(EOS_ID,))
        self.group_size, self.max_new_tokens = group_size, max_new_tokens
        self.key = jax.random.key(seed)
        self.G = G
        self.share_prefix = share_prefix
        if host_shards < 1:
            raise ValueError(f"host_shards must be >= 1, got {host_shards}")
        self.host_shards = host_shards
        self.samplers: list = []
        self._pool = None

    def iteration(self, prompts: Sequence[Sequence[int]], it: int,
                  phases: dict[str, list[float]] | None = None) -> tuple[dict, dict]:
        """One iteration; returns (the step's metrics, the rollouts' columns with rewards/advantages).
        ``phases``: also append each phase's seconds to ``phases[name]`` (``PHASES``), waiting for the
        device at each phase's end (the iteration's results are the same either way)."""
        import jax

        clock = _PhaseClock(phases)
        rows = [list(p) for p in prompts for _ in range(self.group_size)]
        tokens, log_probs = self._generate(rows, jax.random.fold_in(self.key, it))
        clock.mark("sampler")
        rewards = np.asarray([reward_from_ids(t) for t in tokens], np.float32)
        advantages = np.asarray(self.G.compute_advantages(rewards, self.group_size, self.grpo))
        cols = rollout_columns(rows, tokens, log_probs, self.max_new_tokens)
        batch = {k: cols[k] for k in ("tokens", "valid", "loss_mask", "old_logp")}
        batch["advantages"] = advantages
        if self.share_prefix:  # each prompt through the model once, not G times (the loop's own path)
            from cocoda_jax.rl.loop import shared_group_prefix

            batch = shared_group_prefix(batch, self.group_size)
        clock.mark("host")
        if self.ref is not None:
            batch["ref_logp"] = self.learner.log_probs(self.ref, batch["tokens"], batch["valid"], batch.get("prefix"))
            clock.mark("reference", batch["ref_logp"])
        self.state, metrics = self.learner.grpo_step(self.state, batch)
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        clock.mark("step")
        ref = None
        if self.ref is not None:  # back in the full rows' columns (the shared ones score prompt tokens only)
            ref = np.asarray(batch["ref_logp"])
            ref = np.pad(ref, ((0, 0), (cols["tokens"].shape[1] - ref.shape[1], 0)))
        cols.update(rewards=rewards, advantages=advantages, ref_logp=ref,
                    shared_prefix_len=int(batch["prefix"].shape[1]) if "prefix" in batch else 0)
        return metrics, cols

    def _generate(self, rows: list[list[int]], key) -> tuple[list, list]:
        """The rows' completions and log-probs: one batch, or with ``host_shards`` > 1 that many slices of
        whole groups, each its own sampler run from its own thread with ``fold_in(key, j)`` (what the
        loop's ``rollout.host_shards`` does: XLA's CPU runtime decodes one batch on one core)."""
        import jax

        from cocoda_jax.rl.rollout import shard_cuts

        model = self.learner.model(self.state)
        groups = len(rows) // self.group_size
        shards = max(1, min(self.host_shards, groups))
        if not self.samplers:
            self.samplers = [self._make_sampler(model, len(rows[0])) for _ in range(shards)]
        else:
            for sampler in self.samplers:
                sampler.update_params(model)
        if shards == 1:
            res = self.samplers[0].generate(rows, self.params, key)
            return res.tokens, res.log_probs
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(shards, thread_name_prefix="bench-shard")
        cuts = shard_cuts(len(rows), shards, unit=self.group_size)
        outs = list(self._pool.map(
            lambda j: self.samplers[j].generate(rows[cuts[j]:cuts[j + 1]], self.params, jax.random.fold_in(key, j)),
            range(shards)))
        return [t for o in outs for t in o.tokens], [lp for o in outs for lp in o.log_probs]


#: The phases of our iteration that ``Ours.iteration(phases=...)`` times: generation (to host token
#: lists), host work (rewards, advantages, columns, the shared prefix), the reference forward, the step.
PHASES = ("sampler", "host", "reference", "step")


class _PhaseClock:
    """Seconds since the previous mark, appended to ``phases[name]``; does nothing when ``phases`` is None."""

    def __init__(self, phases: dict[str, list[float]] | None):
        self.phases = phases
        self.t = time.perf_counter()

    def mark(self, name: str, wait_for=None) -> None:
        if self.phases is None:
            return
        if wait_for is not None:
            import jax

            jax.block_until_ready(wait_for)
        now = time.perf_counter()
        self.phases.setdefault(name, []).append(now - self.t)
        self.t = now


def ours_phase_ms(ours: "Ours", prompts, first_iteration: int, iterations: int) -> dict[str, float]:
    """Our iteration alone (no peer between), timed by phase: each phase's median in ms and the
    median iteration ("iteration"). Where the time goes, and what a second core buys each phase when
    compared with a run pinned to one core (``taskset -c 0``)."""
    phases: dict[str, list[float]] = {}
    whole = []
    for i in range(iterations):
        t0 = time.perf_counter()
        ours.iteration(prompts, first_iteration + i, phases)
        whole.append(time.perf_counter() - t0)
    out = {k: 1e3 * typical(phases[k]) for k in PHASES if k in phases}
    out["iteration"] = 1e3 * typical(whole)
    return out


def ours_warmup(ours: Ours, prompts, warmup: int) -> tuple[dict, dict]:
    """The untimed first iterations (compilation); the first one's metrics and rollouts (the loss check's)."""
    first = ours.iteration(prompts, 0)
    for i in range(1, warmup):
        ours.iteration(prompts, i)
    return first


class OursClock:
    """Our timed iterations, run one at a time between a peer's iterations (the peer's loop calls it,
    see :func:`paired_seconds`), so both see the same machine load; keeps their seconds and tokens."""

    def __init__(self, ours: Ours, prompts, first_iteration: int):
        self.ours, self.prompts, self.it = ours, prompts, first_iteration
        self.seconds: list[float] = []
        self.tokens: list[int] = []

    def __call__(self) -> None:
        t0 = time.perf_counter()
        _, cols = self.ours.iteration(self.prompts, self.it)  # ends on the host: the metrics are fetched
        self.seconds.append(time.perf_counter() - t0)
        self.tokens.append(int(cols["completion_mask"].sum()))
        self.it += 1


# ------------------------------------------------------------------------------------------------
# TRL
# ------------------------------------------------------------------------------------------------


def make_trl_trainer(hf_dir: str, tokenizer, prompts, *, group_size: int, max_new_tokens: int, beta: float,
                     epsilon: float, learning_rate: float, seed: int, steps: int, workdir: str):
    """TRL's GRPOTrainer with the settings above: one optimizer step per generation batch of
    ``len(prompts) * G`` completions, constant LR, clip 1.0, CPU, nothing logged or saved."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StepClock(TrainerCallback):
        """Marks each optimizer step's end (generation, scoring and update happen in the step) and
        runs ``between`` (our interleaved iteration) there, except after the last step."""

        def __init__(self):
            self.ends, self.resumes, self.between = [], [], None

        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.perf_counter())
            if self.between is not None and len(self.ends) < steps:
                self.between()
            self.resumes.append(time.perf_counter())

    def reward(completions, completion_ids, **kw):
        return [reward_from_ids(c) for c in completion_ids]

    n = len(prompts) * group_size
    args = GRPOConfig(
        output_dir=workdir, per_device_train_batch_size=n, gradient_accumulation_steps=1, num_generations=group_size,
        max_completion_length=max_new_tokens, max_steps=steps, learning_rate=learning_rate,
        lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=1.0, weight_decay=0.0, beta=beta,
        epsilon=epsilon, loss_type="dapo", scale_rewards="none", temperature=1.0, top_p=1.0, top_k=0,
        num_iterations=1, gradient_checkpointing=False,  # TRL's default is True; ours does not remat either
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True, use_cpu=True, seed=seed,
        data_seed=seed, bf16=False, fp16=False, dataloader_num_workers=0, model_init_kwargs={"dtype": torch.float32})
    clock = StepClock()
    ds = Dataset.from_dict({"prompt": [ids_to_text(p) for p in prompts]})
    trainer = GRPOTrainer(model=hf_dir, reward_funcs=reward, args=args, train_dataset=ds,
                          processing_class=tokenizer, callbacks=[clock])
    return trainer, clock


def trl_loss_on(trainer, cols: dict, beta: float) -> float:
    """TRL's own ``GRPOTrainer._compute_loss`` (its forward, its formula) on our rollouts, before
    any training step: the same prompt/completion ids, advantages, old and reference log-probs."""
    import torch

    p = cols["prompt_ids"].shape[1]
    inputs = {
        "prompt_ids": torch.as_tensor(cols["prompt_ids"], dtype=torch.long),
        "prompt_mask": torch.ones(cols["prompt_ids"].shape, dtype=torch.long),
        "completion_ids": torch.as_tensor(cols["completion_ids"], dtype=torch.long),
        "completion_mask": torch.as_tensor(cols["completion_mask"], dtype=torch.long),
        "advantages": torch.tensor(np.array(cols["advantages"]), dtype=torch.float32),
        "old_per_token_logps": torch.as_tensor(cols["completion_old_logp"]),
        "num_items_in_batch": torch.as_tensor(float(cols["completion_mask"].sum())),
    }
    if beta > 0:
        inputs["ref_per_token_logps"] = torch.tensor(np.array(cols["ref_logp"][:, p:]), dtype=torch.float32)
    model = trainer.model
    was_training = model.training
    model.eval()  # eval: the "dapo" normaliser is num_items_in_batch itself (no accumulation window)
    try:
        with torch.no_grad():
            loss = trainer._compute_loss(model, inputs)
    finally:
        model.train(was_training)
        trainer._metrics["eval"].clear()  # our call is no eval step
    return float(loss)


def run_trl(trainer, clock, warmup: int, iterations: int, between=None) -> list[float]:
    """Each timed step's seconds (the steps after the warm-up), with ``between`` run after each step
    but the last and left out of the step times."""
    clock.between = between
    trainer.train()
    return paired_seconds(clock.ends, clock.resumes, warmup - 1, iterations)


# ------------------------------------------------------------------------------------------------
# tunix
# ------------------------------------------------------------------------------------------------


class WordVocab:
    """The word-level vocabulary through the plain tokenizer interface tunix's sampler accepts
    (``encode``/``decode``/``bos_id``/``eos_id``/``pad_id``): tunix hands the HF tokenizer numpy
    strings, which transformers 5 refuses."""

    def encode(self, text, **kw) -> list[int]:
        if not isinstance(text, str):
            text = np.asarray(text).item()
            text = text.decode() if isinstance(text, bytes) else str(text)
        return [int(w[1:]) for w in text.split()]

    def decode(self, ids, **kw) -> str:
        return ids_to_text(i for i in np.asarray(ids).reshape(-1).tolist() if i >= FIRST_WORD_ID)

    def bos_id(self):
        return None

    def eos_id(self) -> int:
        return EOS_ID

    def pad_id(self) -> int:
        return PAD_ID


def tunix_unavailable() -> str | None:
    """Why tunix's GRPO learner cannot run beside this project (``None``: it can be imported)."""
    try:
        from tunix.models.qwen3 import params as _params  # noqa: F401
        from tunix.rl.grpo import grpo_learner  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure is the reason reported
        return f"google-tunix not importable here: {type(e).__name__}: {e}"
    return None


def run_tunix(hf_dir: str, tokenizer, prompts, *, group_size: int, max_new_tokens: int, beta: float,
              epsilon: float, learning_rate: float, seed: int, warmup: int, iterations: int,
              check_cols: dict | None = None, between=None) -> tuple[list[float], float | None]:
    """tunix's GRPOLearner (vanilla rollout, actor and reference colocated on one CPU device) on the
    same HF weights, prompts and settings: token-mean loss, centred advantages (``drgrpo``
    estimator), k3 KL (``low_var_kl``). Each timed iteration's seconds between reward calls (one
    per iteration, right after its generation): from the call of iteration ``warmup`` (so the first
    update's compilation, in the interval before, is excluded), ``iterations`` intervals of one
    update and one generation each; ``between`` (our interleaved iteration) runs inside the reward
    call, after its mark, and is left out. With ``check_cols`` (our first rollouts), also tunix's
    own registered ``grpo`` policy loss on them before any update (``None`` without)."""
    import jax
    import optax
    from tunix.models.qwen3 import model as qwen3_model
    from tunix.models.qwen3 import params as qwen3_params
    from tunix.rl import rl_cluster as rl
    from tunix.rl.grpo import grpo_learner
    from tunix.rl.rollout import base_rollout

    c = bench_model_config(tokenizer.vocab_size)
    cfg = qwen3_model.ModelConfig(num_layers=c.n_layers, vocab_size=c.vocab_size, embed_dim=c.d_model,
                                  hidden_dim=c.ffn_dim, num_heads=c.n_heads, head_dim=c.head_dim,
                                  num_kv_heads=c.n_kv_heads, rope_theta=int(c.rope_theta), norm_eps=c.rms_norm_eps,
                                  use_tied_embedding=c.tie_embeddings)
    # Auto axes (the Mesh default): under jax.make_mesh's Explicit axes tunix's embedding gather is a
    # ShardingTypeError on JAX 0.10
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
    actor = qwen3_params.create_model_from_safe_tensors(hf_dir, cfg, mesh)
    reference = qwen3_params.create_model_from_safe_tensors(hf_dir, cfg, mesh)
    prompt_len = len(prompts[0])
    cluster_config = rl.ClusterConfig(
        role_to_mesh={rl.Role.ACTOR: mesh, rl.Role.REFERENCE: mesh, rl.Role.ROLLOUT: mesh},
        rollout_engine="vanilla", offload_to_cpu=False,
        training_config=rl.RLTrainingConfig(
            actor_optimizer=optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(learning_rate, weight_decay=0.0)),
            eval_every_n_steps=10 ** 9, max_steps=warmup + iterations + 1),
        rollout_config=base_rollout.RolloutConfig(
            max_tokens_to_generate=max_new_tokens, max_prompt_length=prompt_len,
            kv_cache_size=prompt_len + max_new_tokens + 8, temperature=1.0, top_p=1.0, top_k=None,
            eos_tokens=[EOS_ID], seed=seed))  # an int: a key array would be donated by the first call
    cluster = rl.RLCluster(actor=actor, reference=reference, tokenizer=WordVocab(), cluster_config=cluster_config)
    steps = warmup + iterations + 1  # reward call k falls mid-iteration k: one more call closes the last interval
    calls, resumes = [], []

    def reward(prompts, completions, **kw):
        calls.append(time.perf_counter())
        if between is not None and len(calls) < steps:
            between()
        resumes.append(time.perf_counter())
        return [reward_from_ids(WordVocab().encode(t)) for t in completions]

    algo = grpo_learner.GRPOConfig(num_generations=group_size, num_iterations=1, beta=beta, epsilon=epsilon,
                                   advantage_estimator="drgrpo", policy_loss_fn="grpo", loss_agg_mode="token-mean",
                                   kl_loss_mode="low_var_kl")
    learner = grpo_learner.GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=reward)
    first_loss = None if check_cols is None else _tunix_loss_on(actor, algo, check_cols, beta)
    texts = [ids_to_text(p) for p in prompts]
    learner.train([{"prompts": np.asarray(texts)} for _ in range(steps)])  # what a grain batch holds
    return paired_seconds(calls, resumes, warmup, iterations), first_loss


def _tunix_loss_on(actor, algo, cols: dict, beta: float) -> float:
    """tunix's registered ``grpo`` policy loss (its forward on the initial weights) on our rollouts."""
    import jax.numpy as jnp
    from tunix.rl import common, function_registry

    p = cols["prompt_ids"].shape[1]
    example = common.TrainExample(
        prompt_ids=jnp.asarray(cols["prompt_ids"]), prompt_mask=jnp.ones(cols["prompt_ids"].shape, bool),
        completion_ids=jnp.asarray(cols["completion_ids"]), completion_mask=jnp.asarray(cols["completion_mask"] > 0),
        advantages=jnp.asarray(np.array(cols["advantages"]), jnp.float32),
        ref_per_token_logps=jnp.asarray(cols["ref_logp"][:, p:]) if beta > 0 else None,
        old_per_token_logps=jnp.asarray(cols["completion_old_logp"]))
    loss_fn = function_registry.get_policy_loss_fn(algo.policy_loss_fn)
    loss, _ = loss_fn(actor, example, algo_config=algo, pad_id=PAD_ID, eos_id=EOS_ID)
    return float(loss)


# ------------------------------------------------------------------------------------------------


def run(*, prompts: int = 4, group_size: int = 8, prompt_len: int = 32, max_new_tokens: int = 32,
        vocab_size: int = 1024, iterations: int = 5, warmup: int = 1, beta: float = 0.01, epsilon: float = 0.2,
        learning_rate: float = 1e-5, seed: int = 0, torch_threads: int = 0, tunix: bool = True,
        share_prefix: bool = True, host_shards: int = 1) -> dict:
    import jax
    import torch

    if warmup < 1 or iterations < 1:
        raise ValueError("warmup and iterations must be >= 1")
    torch.set_num_threads(torch_threads if torch_threads > 0 else (os.cpu_count() or 1))
    prompt_ids = make_prompts(prompts, prompt_len, vocab_size, seed)
    settings = dict(prompts=prompts, group_size=group_size, prompt_len=prompt_len, max_new_tokens=max_new_tokens,
                    vocab_size=vocab_size, iterations=iterations, warmup=warmup, beta=beta, epsilon=epsilon,
                    learning_rate=learning_rate, seed=seed, share_prefix=share_prefix, host_shards=host_shards)
    with tempfile.TemporaryDirectory() as d:
        hf_dir = os.path.join(d, "model")
        cfg, tok = write_hf_dir(hf_dir, vocab_size, seed)

        ours = Ours(hf_dir, group_size=group_size, max_new_tokens=max_new_tokens, beta=beta, epsilon=epsilon,
                    learning_rate=learning_rate, seed=seed, share_prefix=share_prefix, host_shards=host_shards)
        first_metrics, first_cols = ours_warmup(ours, prompt_ids, warmup)

        trainer, clock = make_trl_trainer(hf_dir, tok, prompt_ids, group_size=group_size,
                                          max_new_tokens=max_new_tokens, beta=beta, epsilon=epsilon,
                                          learning_rate=learning_rate, seed=seed, steps=warmup + iterations,
                                          workdir=os.path.join(d, "trl"))
        trl_first_loss = trl_loss_on(trainer, first_cols, beta)
        beside_trl = OursClock(ours, prompt_ids, warmup)
        trl_iters = run_trl(trainer, clock, warmup, iterations, between=beside_trl)
        del trainer

        beside_tunix = OursClock(ours, prompt_ids, beside_trl.it)
        tunix_iters, tunix_loss = None, None
        tunix_result = tunix_unavailable() if tunix else "not run (--notunix)"
        if tunix_result is None:
            try:
                tunix_iters, tunix_loss = run_tunix(
                    hf_dir, tok, prompt_ids, group_size=group_size, max_new_tokens=max_new_tokens, beta=beta,
                    epsilon=epsilon, learning_rate=learning_rate, seed=seed, warmup=warmup, iterations=iterations,
                    check_cols=first_cols, between=beside_tunix)
                tunix_result = typical(tunix_iters)
            except Exception as e:  # noqa: BLE001 - the failure is the reported reason, never a number
                tunix_result = f"google-tunix imports but its GRPO learner failed here: {type(e).__name__}: {e}"
        phase_ms = ours_phase_ms(ours, prompt_ids, beside_tunix.it, iterations)
    ours_loss = first_metrics["loss"]
    loss_diff = max(abs(ours_loss - x) for x in (trl_first_loss, tunix_loss) if x is not None)
    ours_iters = beside_trl.seconds + beside_tunix.seconds
    tokens = beside_trl.tokens + beside_tunix.tokens
    means = {f"{k}_mean_s_per_iter": float(np.mean(v)) for k, v in
             (("ours", ours_iters), ("trl", trl_iters), ("tunix", tunix_iters)) if v}
    return summarize(
        typical(ours_iters), typical(trl_iters), tunix_result, prompts * group_size * max_new_tokens, loss_diff,
        ours_beside_trl_s=typical(beside_trl.seconds),
        ours_beside_tunix_s=typical(beside_tunix.seconds) if tunix_iters else None,
        ours_first_loss=ours_loss, trl_first_loss=trl_first_loss, tunix_first_loss=tunix_loss,
        loss_check=("our first Learner.grpo_step loss vs TRL's own GRPOTrainer._compute_loss (its torch forward) and "
                    "tunix's registered 'grpo' policy loss (its forward), all before any update, on identical "
                    "rollouts: ids, rewards, advantages, old (sampler) and reference log-probs; "
                    "loss_equal_within is the largest absolute difference"),
        loss_settings=("ours: token_mean, normalize_std=False (advantage r - group mean); TRL: loss_type='dapo', "
                       "scale_rewards='none'; tunix: loss_agg_mode='token-mean', advantage_estimator='drgrpo', "
                       "kl_loss_mode='low_var_kl'; same epsilon and beta (k3 KL), AdamW, clip 1.0, constant LR"),
        timing=("medians of the timed iterations (warm-up excluded); each of our iterations runs between two of "
                "a peer's (TRL: at its step ends; tunix: in its reward call) and is left out of the peer's time, "
                "so each ratio compares iterations that saw the same machine load; ours_alone_phase_ms: our "
                "iterations after the peers, alone, timed by phase (ms medians; the device waited for at each "
                "phase's end)"),
        **means, ours_iter_s=ours_iters, trl_iter_s=trl_iters, tunix_iter_s=tunix_iters,
        ours_alone_phase_ms=phase_ms,
        ours_completion_tokens_per_iter=float(np.mean(tokens)), ours_shared_prefix_len=first_cols["shared_prefix_len"],
        params=cfg.num_params(),
        backend=jax.default_backend(), host_malloc=host_memory.status(), torch_threads=torch.get_num_threads(),
        cpu_count=os.cpu_count(), **settings)


def main(argv):
    del argv
    out = run(prompts=F.prompts, group_size=F.group_size, prompt_len=F.prompt_len, max_new_tokens=F.max_new_tokens,
              vocab_size=F.vocab_size, iterations=F.iterations, warmup=F.warmup, beta=F.beta, epsilon=F.epsilon,
              learning_rate=F.learning_rate, seed=F.seed, torch_threads=F.torch_threads, tunix=F.tunix,
              share_prefix=F.share_prefix, host_shards=F.host_shards)
    emit_json(out, F.json_out)


if __name__ == "__main__":
    _define_flags()
    app.run(main)
