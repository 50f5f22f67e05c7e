"""python variant.py WORKDIR [key=value ...]; WORKDIR copied from /tmp/x/prefix when missing."""
import sys, shutil, os, json, time
sys.argv, args = sys.argv[:1], sys.argv[1:]
from absl import logging
import launch  # applies numerics/env
from configs.default import get_config
from cocoda_jax.runs import coevolve
work = args[0]
c = get_config()
c.domain.n_dev = 512
for kv in args[1:]:
    k, v = kv.split("=", 1)
    node = c
    *path, last = k.split(".")
    for p in path: node = node[p]
    old = node[last]
    node[last] = type(old)(v) if not isinstance(old, bool) else v in ("1", "true", "True")
if work.endswith("prefix"):
    r = coevolve.run(c, work, progress=False, stop_after_round=0)
else:
    if not os.path.exists(work) and "fresh" not in work:
        shutil.copytree("/tmp/x/prefix", work)
    t = time.time()
    r = coevolve.run(c, work, progress=False, allow_config_change=True)
    print("SUMMARY", work, args[1:], "val", r["accuracy"]["per_round"], "dev", r["dev_accuracy_per_round"],
          "decisions", [d["outcome"] for d in r["decisions"]], "test", r["test_accuracy"], "min", (time.time()-t)/60, flush=True)
    for rr in r["per_round"][1:]:
        m = rr.get("mechanism", {})
        print("  mech", {k: m.get(k) for k in ("uniform_group_share", "entropy", "update_norm")}, "dev_cat", rr.get("dev_per_category"), flush=True)
