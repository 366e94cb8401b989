"""The kit's version: one place, read by the package facade, the CLI, the
files the kit writes (``kit_version``) and the build (pyproject.toml)."""
__version__ = "0.1.0"
