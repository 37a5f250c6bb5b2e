"""The records every layer reads: the check registry (checks.py), what checks answer (results.py, details.py) and
what the all-reduce bench measures (allreduce_runs.py). Data only, below every layer that reads them: they import
nothing of provision but the statuses (docs/architecture.md)."""
