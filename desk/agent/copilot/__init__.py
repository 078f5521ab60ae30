"""The copilot (M1): a person's turns, the changes it stages, their approvals, sessions and history."""
