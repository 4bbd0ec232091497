"""`python -m threads_aws_dev ...`: the `threads-aws` command line."""

import sys

from .cli import main

sys.exit(main())
