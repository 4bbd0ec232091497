"""Helpers shared by the test modules (no tests of their own): `shared` (the contract beside the
repo), `log` (hash-chained log builders for the pure core), `engine` and `host` (the worker and
the Host on the moto `aws` fixture), `dev_process` (`threads-aws dev` as a subprocess),
`providers` (recorded provider payloads)."""
