"""Questions: query sets (question + SQL), SQL analysis (query types, difficulty, tables, columns)."""
