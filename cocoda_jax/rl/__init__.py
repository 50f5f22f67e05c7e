"""Reinforcement learning of the planner: rollouts, rewards and GRPO math.

* :mod:`cocoda_jax.rl.actions` — the action format (one restricted assignment per step), its pure
  static checker against a LibrarySnapshot, the sandboxed step runner and the observation text.
* :mod:`cocoda_jax.rl.trajectory` — prompts, the text-level episode loop over any policy callable,
  the frozen :class:`~cocoda_jax.rl.trajectory.Trajectory` record, SFT demonstrations as segments
  labelled trainable or not (the loss masks).
* :mod:`cocoda_jax.rl.rewards` — registered reward functions: ``R_res + lambda * sum Phi`` and options.
* :mod:`cocoda_jax.rl.grpo` — registered advantages and losses (GRPO, Dr. GRPO) chosen by name,
  clipped ratio, k3 KL, aggregations as (sum, count).
* :mod:`cocoda_jax.rl.update` — optax optimizer/schedule/clipping from a config.
* :mod:`cocoda_jax.rl.learner` — the jitted SFT and GRPO steps on the NNX planner over one mesh,
  with donated, sharded state and exact micro-batching (``accumulate_gradients``).
* :mod:`cocoda_jax.rl.loop` — SFT phase, GRPO iterations (rollouts, advantages, PPO epochs), evaluation.

Submodules are imported on use; this root imports nothing (``grpo`` and ``update`` need JAX, the rest does not).
"""
