"""ops layer."""
