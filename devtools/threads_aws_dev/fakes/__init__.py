"""Local HTTP fakes of external APIs (dev and tests only; not imported by any Lambda path)."""
