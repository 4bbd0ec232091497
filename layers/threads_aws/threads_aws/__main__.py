"""`python -m threads_aws ...`: the `threads-aws` command line."""

import sys

from .cli import main

sys.exit(main())
