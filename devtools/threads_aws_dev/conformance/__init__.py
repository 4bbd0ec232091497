"""The conformance runner: `python -m threads_aws_dev.conformance DIR`."""

from .runner import CaseResult, run_case, run_dir

__all__ = ["CaseResult", "run_case", "run_dir"]
