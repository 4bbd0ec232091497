"""threads_aws: the threads host on AWS (log core, stores, host)."""

__version__ = "0.1.0"
WRITER = {"impl": "threads-aws", "version": __version__}
