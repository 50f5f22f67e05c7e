"""The real-scale path rehearsed on the CPU (stage 0 to 3 and a resume): a tiny random Qwen3 written in Hugging
Face format here (transformers ``Qwen3Config`` + ``save_pretrained``, a BPE trained here as its
tokenizer), GSM8K-format files written here, and ``configs/qwen3_0p6b_gsm8k.py`` itself, shrunk on
the command-line keys only (sizes, budgets, the mesh to 2 fake devices), run through stage 0 (a
local OpenAI-compatible teacher), stages 1-3, a checkpoint, and a resume. Then the student path: the
same tiny Qwen3 served by ``cocoda_jax.serving`` (what ``launch/serve.py`` runs) and asked by
``launch/collect_demos.py``'s stage 0 (rejection sampling from a random student solves nothing,
and every question is still recorded)."""

import json

import pytest

from cocoda_jax.demos import read_records
from cocoda_jax.runs import coevolve, rundir, stage0
from cocoda_jax.errors import ConfigError
from cocoda_jax.runs.progress import RunProgress
from configs import real_scale
from tests.demos.word_problem_files import Oracle, OracleServer, synthetic_tasks, write_gsm8k

pytestmark = pytest.mark.filterwarnings("ignore:Some donated buffers were not usable")


def _hf_qwen3(path, tasks):
    """A random Qwen3 (2 layers, width 64) in HF format, with a BPE trained on prompt-like text."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cocoda_jax.models.tokenizer import train_bpe_tokenizer
    from cocoda_jax.data.synthetic_math import primitive_library
    from cocoda_jax.rl import trajectory

    cards = trajectory.tool_cards(primitive_library())
    from cocoda_jax.demos.collect import SYSTEM_PROMPT
    texts = [SYSTEM_PROMPT + "\n" + trajectory.segments_text(trajectory.demonstration_segments(t, cards))
             for t in tasks]
    tok = train_bpe_tokenizer(texts, 2000)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    train, test = synthetic_tasks(28, 6)
    root = tmp_path_factory.mktemp("real_path")
    return root, write_gsm8k(root / "gsm8k", train, test), _hf_qwen3(root / "qwen3_tiny", train), train


def rehearsal_config(data_dir, hf_dir, base_url):
    """``configs/qwen3_0p6b_gsm8k.py:node8`` with what a CPU needs changed (the keys a user would
    override on the command line)."""
    c = real_scale.make("qwen3_0p6b", "gsm8k", "node8")
    c.model.hf_checkpoint = str(hf_dir)
    c.mesh.update(dict(data=1, fsdp=2, tensor=1))
    c.domain.update(dict(data_dir=str(data_dir), n_train=0, n_val=4, n_test=6))
    c.demos.update(dict(base_url=base_url, model="oracle", api_key_env="", k=2, concurrency=4, chunk=8,
                        timeout_s=10.0, max_retries=1))
    c.rollout.update(dict(max_steps=6, max_len=512, length_multiple=512, max_new_tokens=8))
    # packed to the shrunk max_len (the real config packs to its own, 4,096)
    c.sft.update(dict(steps=4, batch_size=4, n_demos=24, warmup_steps=1, micro_batches=1, learning_rate=1e-3,
                      pack_length=512))
    c.grpo.update(dict(iterations=2, iterations_per_round=1, tasks_per_iteration=2, group_size=2, eval_every=2,
                       micro_batches=1))
    c.checkpoint.update(dict(every_sft_steps=2, every_iterations=1))
    c.coevolve.update(dict(rounds=1, refresh_sft_steps=1, refresh_demos=8, probation_iterations=0))
    c.rods.n_seeds = 8
    c.rods.thresholds.update(dict(synth_per_epoch=1, burn_in_epochs=0, hard=0.0))
    c.sandbox.workers = 2
    c.report.retrieval_queries = 2
    return c


@pytest.mark.slow
def test_the_real_scale_config_runs_stage_0_to_3_and_resumes(files, tmp_path):
    root, data_dir, hf_dir, train = files
    # the wrong program for two questions and prose for a quarter of the seeds: some questions stay unsolved
    oracle = Oracle(train, wrong={train[0].question, train[1].question}, garble=lambda seed: seed % 4 == 0)
    with OracleServer(oracle) as server:
        config = rehearsal_config(data_dir, hf_dir, server.url)
        stopped = coevolve.run(config, tmp_path, progress=False, stop_after_round=0)  # stages 0-2
        asked = len(oracle.requests)
        report = coevolve.run(config, tmp_path, progress=False)  # resumes from stage 2's checkpoint: round 1
    assert stopped == {"stopped_after_round": 0}
    assert asked == 2 * 24 and len(oracle.requests) == asked  # 28 - 4 validation questions, k=2; none asked again
    records = read_records(tmp_path / stage0.DEMOS_FILE)
    solved = [r for r in records.values() if r.solved]
    assert len(records) == 24 and 12 <= len(solved) < 24
    wrong = {"gsm8k-train-1", "gsm8k-train-2"} & set(records)  # lines 1-2: the oracle's wrong programs
    assert wrong and not any(records[i].solved for i in wrong)
    assert dict(records[next(iter(wrong))].failures).get("wrong_answer", 0) >= 1
    assert all(dict(r.provenance)["model"] == "oracle" for r in solved)
    summary = json.loads((tmp_path / stage0.SUMMARY_FILE).read_text())
    assert summary["asked_tasks"] == 0 and summary["stored_solved"] == len(solved)  # the resume's stage 0
    progress = RunProgress.from_json(rundir.latest_checkpoint(tmp_path).payloads["progress"])
    assert progress.round == 1 and {i for i, _ in progress.demo_programs} <= {r.task_id for r in solved}
    assert report["rounds"] == 1 and report["test_accuracy"] is not None


def test_without_a_demos_section_the_benchmark_is_a_config_error(files, tmp_path):
    root, data_dir, hf_dir, train = files
    config = rehearsal_config(data_dir, hf_dir, "http://127.0.0.1:9")
    del config["demos"]
    with pytest.raises(ConfigError, match="stage 0 must collect"):
        coevolve.run(config, tmp_path, progress=False)


def test_the_student_served_over_http_is_asked_by_collect_demos(files, tmp_path):
    from cocoda_jax.serving import OpenAIServer, load_served_model
    from launch import collect_demos

    root, data_dir, hf_dir, train = files
    served = load_served_model(hf_dir, model_id="student")
    with OpenAIServer(served, cache_size=2080, max_batch=8, batch_wait_ms=50, seed=0,
                      default_max_tokens=16) as server:
        config = rehearsal_config(data_dir, hf_dir, server.url)
        config.demos.update(dict(source="student", model="student", k=2, max_tokens=16, temperature=1.0))
        config.domain.n_train = 2
        summary = collect_demos.collect(config, tmp_path, show_progress=False)
    assert summary["asked_tasks"] == 2 and summary["requests"] == 4
    records = read_records(tmp_path / stage0.DEMOS_FILE)
    assert len(records) == 2 and all(dict(r.provenance)["source"] == "student" for r in records.values())
    assert sum(summary["failures"].values()) == 4 - summary["solved"]
