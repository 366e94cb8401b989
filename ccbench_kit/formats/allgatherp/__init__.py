"""The Meta AllgatherP bench's printed table, read."""
