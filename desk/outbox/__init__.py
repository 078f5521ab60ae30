"""The outbox: one event per new work order, claimed by the triage worker with a lease (spec AGT-1, AGT-2)."""
