"""What every agent shares: the provider, egress, budget, the run store, the tool registry and the events."""
