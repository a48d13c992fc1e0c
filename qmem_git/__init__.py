"""qmem-git: managed auto-memory for AI coding agents, kept as a git repository."""

__version__ = "0.1.0"
