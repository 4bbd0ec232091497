"""The run engine: model adapters, tool executors, the permission engine, the step loop that
drives a branch from its log, and the run-step queue."""
