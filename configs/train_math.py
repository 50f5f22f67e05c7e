"""``launch/train.py`` on the embedded synthetic-math domain: SFT then GRPO with the primitive
library fixed (the learner alone, before co-evolution). Shares every section with the default."""

from configs import default


def get_config():
    c = default.get_config()
    c.grpo.iterations = 30
    c.grpo.tasks_per_iteration = 16
    c.grpo.eval_every = 10
    return c
