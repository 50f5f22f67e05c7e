"""Config of `launch/demo_foundation.py`: the foundation demo on the CPU (seconds)."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.seed = 0
    # LibrarySnapshot: the DAG's depth bound (INSERTTOOL rejects deeper composites).
    config.max_depth = 4
    # The sandbox: worker processes and the wall-clock limit of one program.
    config.sandbox_workers = 2
    config.timeout_s = 5.0
    # Type-directed search: how many tools a query may return.
    config.lookup_limit = 5
    return config
