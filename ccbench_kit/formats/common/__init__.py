"""Shared by every reader: the text read, its rounding, Table -> Dataset, errors."""
