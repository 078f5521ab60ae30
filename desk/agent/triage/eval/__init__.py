"""`desk eval triage`: the triage agent's own call over a labelled set, scored against simple baselines."""
