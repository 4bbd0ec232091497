"""Example Lambda tools shipped with the stack (functions/tool_example): what a tool author
writes against the worker's payload contract (engine/lambda_tools.py)."""
