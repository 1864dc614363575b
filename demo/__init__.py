"""``make demo``: the deadlocks of kube-scheduler and their cure, measured side by side."""
