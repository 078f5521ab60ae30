"""The triage agent (spec §7): one forced tool call per new work order, under policy, from the outbox."""
