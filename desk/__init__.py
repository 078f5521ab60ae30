"""Work Order Desk: work orders for office staff, with AI agents under guardrails."""
