"""The console keeps warnings; every INFO line (absl, orbax, ours) goes to workdir/logs/run.log."""

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import logging, sys
    from absl import app
    from absl import logging as absl_logging
    from cocoda_jax.runs.logs import route_logs

    def main(_):
        path = route_logs(sys.argv[1])
        assert route_logs(sys.argv[1]) == path  # idempotent: one file handler
        logging.getLogger("orbax.checkpoint").info("an orbax info line")
        absl_logging.info("an absl info line")
        absl_logging.warning("a warning line")

    app.run(main, argv=sys.argv[:1] + ["--"] + sys.argv[1:])
''')


def test_info_goes_to_the_run_log_and_only_warnings_to_the_console(tmp_path):
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "logs" / "run.log").read_text()
    assert "an orbax info line" in text and "an absl info line" in text and "a warning line" in text
    assert "a warning line" in out.stderr and "info line" not in out.stderr


MOVED = textwrap.dedent('''
    import logging, sys
    from absl import app
    from absl import logging as absl_logging
    from cocoda_jax.runs.logs import route_logs, route_process_logs

    def main(_):
        route_logs(sys.argv[1], process_index=None)  # the cluster has not told the index yet
        absl_logging.info("before the index was known")
        path = route_process_logs(sys.argv[1], 2)
        assert path.name == "process_2.log" and route_process_logs(sys.argv[1], 2) == path
        absl_logging.info("after the index was known")
        absl_logging.warning("a warning line")

    app.run(main, argv=sys.argv[:1] + ["--"] + sys.argv[1:])
''')


def test_a_process_of_a_multi_process_run_logs_to_its_own_file(tmp_path):
    """Lines logged before the index was known open the process's own file; no other file is written."""
    out = subprocess.run([sys.executable, "-c", MOVED, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["process_2.log"]
    own = (tmp_path / "logs" / "process_2.log").read_text()
    assert own.index("before the index was known") < own.index("after the index was known")
    assert "a warning line" in out.stderr and "index was known" not in out.stderr


def test_log_names_and_no_routing_without_route_logs(tmp_path):
    from cocoda_jax.runs.logs import log_name, route_process_logs

    assert (log_name(0), log_name(3)) == ("run.log", "process_3.log")
    import pytest

    with pytest.raises(ValueError):
        log_name(-1)
    assert route_process_logs(tmp_path, 1) is None and not (tmp_path / "logs").exists()
