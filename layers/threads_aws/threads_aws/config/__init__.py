"""Agent configuration below the engine: what the agents file is checked against.

The agents file loader (`threads_aws.agents`, read by every handler) validates the file with
`agents_file` (adapters, model parameters, permission rules, hook rules, retry defaults) and
names the built-in tools of `builtin_tools`; the engine imports these modules too (and
`agents`), never the reverse, so config never loads the worker.
"""
