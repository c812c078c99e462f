"""Where runs live: in memory (to show why that is not enough) or in SQLite (the default)."""

from .base import Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["Store", "MemoryStore", "SQLiteStore"]
