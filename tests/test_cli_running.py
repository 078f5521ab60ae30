"""`desk seed --demo` beside a running embedded desk: one line saying to stop it first, no traceback."""

import subprocess

from bench.harness import desk_command, desk_env, desk_running


def test_seed_while_the_embedded_desk_runs_says_to_stop_it_first(tmp_path):
    home = tmp_path / "desk"
    with desk_running(home, DESK_SECRET="x" * 40, AI_ENABLED="false", DESK_RUN_WORKER="false"):
        result = subprocess.run(  # noqa: S603 - our own command
            desk_command("seed", "--demo"),
            env=desk_env(DESK_DATA_DIR=str(home)),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("desk: the desk is running (embedded database pid ") and "stop it first" in line
