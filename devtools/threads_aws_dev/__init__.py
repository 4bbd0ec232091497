"""threads_aws_dev: the developer tooling of threads-aws, beside the runtime it imports.

The local host (`threads-aws dev`: AWS emulated in process, the local gateway, queue workers),
the local fakes of provider APIs, the conformance runner, the code generators, the CLI and the
terminal UI. Nothing here ships in the Lambda layer, and nothing in `threads_aws` imports it.
"""
