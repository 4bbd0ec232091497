"""Agent configuration below the engine: what the agents file is checked against.

The agents file loader (`threads_aws.agents`, read by every handler) validates adapters, model
parameters, permission rules, hook rules and retry defaults with these modules alone; the engine
imports them too (and `agents`), never the reverse, so config never loads the worker.
"""
