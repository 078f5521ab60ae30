"""The agent runtime: copilot runs (M1) and, later, the triage worker (M2). Services never import this."""
