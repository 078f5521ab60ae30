"""`python -m desk worker`: the `desk` command without the web app, as `desk run` starts its worker (desk/cli.py)."""

from desk.cli import main

main()
