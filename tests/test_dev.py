"""dev.py, behind the README's two commands: what a first run shows of its installs."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _dev():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_install_step_says_nothing_when_it_works_and_everything_when_it_fails(capfd):
    dev = _dev()

    dev.check(sys.executable, "-c", "import sys; print('building'); print('a note', file=sys.stderr)", quiet=True)
    quiet = capfd.readouterr()
    failing = "import sys; print('resolving'); sys.stdout.buffer.write(b'caf\\xe9\\n'); sys.exit('no such dist')"
    with pytest.raises(SystemExit) as stopped:
        dev.check(sys.executable, "-c", failing, quiet=True)
    shown = capfd.readouterr()

    assert (quiet.out, quiet.err) == ("", "")
    assert stopped.value.code == 1
    assert shown.out.startswith("resolving\ncaf")  # shown whatever its bytes, never a traceback of dev.py's own
    assert "no such dist" in shown.err
    assert shown.err.endswith("failed (exit 1)\n")
