"""The embedded default of the main job (``launch/coevolve.py``): the tiny planner on synthetic math,
on the CPU, in minutes (6 min 58 s on 2 idle cores, docs/experiments.md section M).

Every knob of the run lives here; ``--config.section.key=value`` overrides one from the command line
(ml_collections refuses keys that do not exist). The real-scale configs import this one and change
the model, the domain, the mesh and the budgets.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0

    # The domain (module: a module to import first, so a domain defined outside this package can register
    # itself; see docs/domains.md). heldout="instances": validation/test are unseen instances in the training wording;
    # "wording": the generator's held-out templates and entities (a much harder transfer test).
    # demos="seen_pairs": programs only for the demonstrated motif pairs, the rest answer-only (the faithful
    # setting, docs/design.md); n_dev: held-out tasks no decision reads, scored after every round.
    c.domain = ml_collections.ConfigDict(dict(
        name="synthetic_math", seed=0, max_depth=2, n_train=2000, n_val=128, n_test=128, heldout="instances",
        data_dir="", grow_library_to=0, module="", demos="seen_pairs", n_dev=128))

    # The planner: a preset of cocoda_jax.models.config ("tiny" takes its vocabulary from the tokenizer
    # trained on the domain's demonstrations; real presets load HF weights in the real-scale configs).
    # remat: rematerialise each layer in the train steps (less memory, one more forward; the real-scale configs set it)
    # logits_chunk: the head's logits that many positions at a time in the train steps (0: all at once);
    # scan_layers: the layers as one lax.scan in the train steps and the sampler (one compiled layer body at any depth)
    c.model = ml_collections.ConfigDict(dict(preset="tiny", vocab_size=1024, hf_checkpoint="", remat=False,
                                             logits_chunk=0, scan_layers=False))

    # One mesh over (data, fsdp, tensor); data=-1 takes every device the other axes leave.
    c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
    # Multi-host start (jax.distributed.initialize); leave the address empty to let JAX detect the
    # cluster (TPU pods, SLURM), or give coordinator/process count/id explicitly.
    c.distributed = ml_collections.ConfigDict(dict(
        initialize=False, coordinator_address="", num_processes=1, process_id=0))

    # Episodes: the action format's turn limit, the token budget of one rollout, sampling.
    # host_shards: on a CPU host, the rollout rows in that many slices decoded from as many threads
    # (XLA's CPU runtime decodes one batch on one core; 2 on 2 idle cores: docs/experiments.md section K).
    # It changes the sampled outcomes (each slice has its own key): part of the run's identity.
    c.rollout = ml_collections.ConfigDict(dict(
        max_steps=4, max_len=384, max_new_tokens=24, temperature=1.0, top_p=0.95, top_k=0, timeout_s=10.0,
        length_multiple=64, host_shards=1))

    # The prompt's tool cards C_q(L) (cocoda_jax.rl.prompts.RetrievalConfig): "cascade" = the typed DAG
    # retrieval cascade per question (k cards; L2 adds the usage votes of the `neighbours` most similar
    # solved training questions), "full" = the whole library (the -TDR ablation), "none" = no cards.
    # "bare" cards are names alone: the tiny planner's context cannot afford more. usage_weight=20 was
    # chosen on validation questions (launch/bench/retrieval.py --domain: 10 loses recall once
    # distractors join the library, 20 and 40 do not).
    c.retrieval = ml_collections.ConfigDict(dict(
        mode="cascade", k=8, card_style="bare", l1_max_cost=3.0, l2_shortlist=12, l2_keep=16, neighbours=10,
        usage_weight=20.0, with_children=False))

    # R = R_res + lam * sum Phi (docs/papers.md, A.4), with the documented options.
    c.reward = ml_collections.ConfigDict(dict(
        name="dag", lam=0.2, credit_requires_success=True, credit_cap=None, normalize_by_calls=False,
        malformed_penalty=0.0, ill_typed_penalty=0.0))

    # Stage 2: SFT on the (refactored) gold demonstrations.
    c.sft = ml_collections.ConfigDict(dict(
        steps=200, batch_size=16, learning_rate=5e-3, warmup_steps=20, micro_batches=1, n_demos=2000))

    # GRPO (beta=0: no reference forward on the CPU budget). advantage / loss: a variant registered in
    # cocoda_jax.rl.grpo ("grpo_gar": the composite credit kept in reward units, docs/reward.md; "grpo";
    # "dr_grpo" = Dr. GRPO's unbiased form). lr 5e-5 was chosen on seed 0's dev split (docs/experiments.md
    # section M: 1e-4 and 2e-4 lost dev accuracy over the rounds).
    c.grpo = ml_collections.ConfigDict(dict(
        iterations=30, iterations_per_round=10, tasks_per_iteration=12, group_size=8, learning_rate=5e-5,
        epsilon=0.2, epsilon_high=0.28, beta=0.0, aggregation="token_mean", normalize_std=True,
        micro_batches=1, mask_uniform_groups=True, ppo_epochs=2, eval_every=10,
        advantage="grpo_gar", loss="grpo", schedule="cosine", warmup_steps=2))

    # Stage 1: rounds of the symbolic abstractor over the gold demonstrations.
    c.warm = ml_collections.ConfigDict(dict(rounds=2))

    # Stage 3: co-evolution rounds.
    c.coevolve = ml_collections.ConfigDict(dict(
        rounds=3, rho=0.8, frozen_library=False, mine_in_rounds=True, direct_answer=False, refresh_sft_steps=10,
        refresh_demos=256, refresh_learning_rate=3e-5, probation_iterations=3, keep_successes=True,
        abstractor=ml_collections.ConfigDict(dict(
            min_tasks=2, max_inputs=3, min_nodes=2, max_nodes=6, max_candidates=4, tool_cost=1.0, body_cost=1.0,
            min_compression=0.0, n_examples=3, sign_post=True, max_condition_chars=240)),
        acceptance=ml_collections.ConfigDict(dict(tolerance=0.04, reference="best", allow_planner_only=True,
                                                  growth_must_pay=True)),
        # who proposes composites: "symbolic" (the miner above), "teacher" (an LM behind an
        # OpenAI-compatible endpoint, e.g. vLLM/SGLang or launch/serve.py) or "both"; every proposal
        # passes the same validation and acceptance (docs/teacher.md)
        proposers="symbolic",
        teacher=ml_collections.ConfigDict(dict(
            base_url="http://127.0.0.1:8000", model="teacher", api_key_env="OPENAI_API_KEY", timeout_s=120.0,
            max_retries=3, temperature=0.0, max_tokens=2048, max_programs=24, max_candidates=8))))

    # RODS: the task curriculum (on by default); thresholds are cocoda_jax.rods.RodsConfig's fields;
    # signal: what the tracker reads, "reward" (R = R_res + lam * sum Phi, what GRPO trains on) or
    # "progress" (the RODS paper's R_P).
    c.rods = ml_collections.ConfigDict(dict(
        enabled=True, n_seeds=256, background=True, signal="reward", selection="priority",
        thresholds=ml_collections.ConfigDict(dict(
            window=4, mastered=0.85, hard=0.2, beta=0.2, p_max=400, burn_in_epochs=1, synth_per_epoch=8,
            variants_per_seed=2, k_max=3))))

    c.sandbox = ml_collections.ConfigDict(dict(workers=2, timeout_s=10.0))
    c.checkpoint = ml_collections.ConfigDict(dict(keep=3, every_sft_steps=100, every_iterations=10))
    c.report = ml_collections.ConfigDict(dict(retrieval_queries=16, retrieval_k=8))
    return c
