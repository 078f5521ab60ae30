"""The durable job queue (spec AGT-1, AGT-2): jobs in the outbox, claimed with a lease and a fence, retried with
backoff, given up as dead letters. It runs the tasks it is handed and imports none (desk/tasks.py hands them)."""
