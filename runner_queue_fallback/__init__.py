"""Queue fallback for self-hosted GitHub Actions runner pools."""

__all__ = ["__version__"]

__version__ = "0.1.0"
