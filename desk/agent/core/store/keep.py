"""How long the agents' records are kept (SEC-12), and the shape they are read in."""

from datetime import timedelta
from typing import Any

Doc = dict[str, Any]
KEEP_TRANSCRIPT = timedelta(days=90)  # SEC-12: messages and tool-call results
KEEP_RUNS = timedelta(days=365)  # SEC-12: run and session records
