"""Verbalization templates (HoloBench section 3.3, table 4): at least five per table, chosen per row from the seed.

Templates live in ``assets/templates/<db_id>.yaml`` as ``table: [template, ...]``; a template is a Python
format string whose fields are column names of the *preprocessed* table, e.g.
``"{airline} flight {flight} left {origin_airport} on {year}-{month}-{day}."``.

**Missing values.** A field whose value is NULL (SQL NULL in the source, or a value the value rule made NULL:
empty text, ``'NULL'`` text) states a phrase instead: the file's optional ``missing:`` key, ``{table: {column:
phrase}}``, or :data:`DEFAULT_MISSING` ("not recorded"). So no row is dropped for a missing value, and the
sentence says that the value is not recorded, which is what the gold SQL reads (NULL matches no ``=``, ``IN`` or
``LIKE``; SQL that compares such a column in a NULL-sensitive way is rejected, ``NULL comparison``).
:func:`missing_phrase` gives the phrase for (templates, table, column).
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from ctxbench.core.config import assets_dir, read_yaml
from ctxbench.core.errors import InputError

MIN_TEMPLATES = 5
DEFAULT_MISSING = "not recorded"
MISSING_KEY = "missing"


def format_value(v: Any) -> str:
    """Render a cell for text: integral floats without ``.0``, other floats in shortest round-trip form."""
    t = type(v)
    if t is str:
        return v
    if t is int:
        return str(v)
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


def template_fields(template: str) -> list[str]:
    """Column names a template uses, in order of appearance (format specs are not allowed)."""
    out = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:
        raise InputError(f"template {template!r} is malformed ({e}): fields are {{column}}; write {{{{ for a brace")
    for _, fname, spec, conv in parsed:
        if fname is None:
            continue
        if not fname or spec or conv:
            raise InputError(f"template {template!r}: fields must be plain {{column}} names")
        out.append(fname)
    return out


@dataclass
class TemplateSet:
    """Templates of one database: ``templates[table] = [template, ...]``."""

    db_id: str
    templates: dict[str, list[str]]
    path: str = ""
    # table -> column -> phrase stated for a NULL value (the file's ``missing:`` key); DEFAULT_MISSING otherwise
    missing: dict[str, dict[str, str]] = field(default_factory=dict)

    def missing_phrase(self, table: str, column: str) -> str:
        """The phrase a template states for a NULL ``column`` of ``table``: the ``missing:`` key's phrase, else
        "not recorded" (:data:`DEFAULT_MISSING`)."""
        return self.missing.get(table, {}).get(column, DEFAULT_MISSING)

    def columns(self, table: str) -> set[str]:
        """Union of the columns used by the table's templates."""
        return {f for t in self.templates[table] for f in template_fields(t)}

    def common_columns(self, table: str) -> set[str]:
        """Columns used by *every* template of the table (the only ones a query may use: every row must state them)."""
        sets = [set(template_fields(t)) for t in self.templates[table]]
        return set.intersection(*sets) if sets else set()

    def check(self, table_columns: dict[str, list[str]]) -> None:
        """Check every template against its table's columns. Raises InputError naming table, template and column."""
        for table, temps in self.templates.items():
            if table not in table_columns:
                continue
            cols = {c.lower(): c for c in table_columns[table]}
            for i, t in enumerate(temps):
                for f in template_fields(t):
                    if f.lower() not in cols:
                        raise InputError(f"{self.path or self.db_id}: table {table!r}, template {i + 1} ({t!r}) uses "
                                         f"column {f!r}, which the table lacks (columns: {', '.join(table_columns[table])})")

    def choose(self, table: str, rowid: int, seed: int) -> int:
        """Index of the template for a row: SHA-256 of (seed, table, rowid) modulo the number of templates."""
        h = hashlib.sha256(f"{seed}|{table}|{rowid}".encode()).digest()
        return int.from_bytes(h[:8], "big") % len(self.templates[table])

    def verbalize(self, table: str, columns: list[str], row: tuple, rowid: int, seed: int) -> str:
        """The sentence for one row (rowid in ``source.sqlite``)."""
        k = self.choose(table, rowid, seed)
        compiled = self._compiled(table, tuple(columns))[k]
        if compiled is None:  # a field that is not a plain column name: str.format's own lookup (and its errors)
            values = {c: self.missing_phrase(table, c) if v is None else format_value(v) for c, v in zip(columns, row)}
            return self.templates[table][k].format(**values)
        fmt, idx = compiled
        # format_value inlined for the common cell types (text, integers): the same strings, fewer calls
        return fmt.format(*[v if (t := type(v)) is str else str(v) if t is int else
                            self.missing_phrase(table, columns[i]) if v is None else format_value(v)
                            for i, v in zip(idx, map(row.__getitem__, idx))])

    def verbalize_many(self, table: str, columns: list[str], rows: list[tuple], rowids: list[int],
                       seed: int) -> list[str]:
        """:meth:`verbalize` of many rows of one table (``rows[i]`` has rowid ``rowids[i]``): the same strings,
        with the per-table work (compiled templates, the seed's hash prefix) done once for the batch."""
        compiled = self._compiled(table, tuple(columns))
        if any(c is None for c in compiled):
            return [self.verbalize(table, columns, r, i, seed) for r, i in zip(rows, rowids)]
        n = len(compiled)
        prefix = f"{seed}|{table}|".encode()
        sha256, from_bytes, fv = hashlib.sha256, int.from_bytes, format_value
        phrases = [self.missing_phrase(table, c) for c in columns]
        out = []
        for row, rowid in zip(rows, rowids):
            # choose(): SHA-256 of "seed|table|rowid", first 8 bytes big-endian, modulo the template count
            fmt, idx = compiled[from_bytes(sha256(prefix + str(rowid).encode()).digest()[:8], "big") % n]
            out.append(fmt.format(*[v if (t := type(v)) is str else str(v) if t is int else
                                    phrases[i] if v is None else fv(v) for i, v in zip(idx, map(row.__getitem__, idx))]))
        return out

    def _compiled(self, table: str, columns: tuple[str, ...]) -> list[tuple[str, list[int]] | None]:
        """Each template of ``table`` as a positional format string and the column index of each field (the same
        text as ``template.format(**{column: value})``, formatting only the columns the template states); None
        for a template with a field that is not one of ``columns``."""
        cache = self.__dict__.setdefault("_compiled_cache", {})
        key = (table, columns)
        if key not in cache:
            where = {c: i for i, c in enumerate(columns)}  # the last of repeated names, as the dict of values
            out: list[tuple[str, list[int]] | None] = []
            for t in self.templates[table]:
                parts, idx, ok = [], [], True
                for lit, fname, _, _ in string.Formatter().parse(t):
                    parts.append(lit.replace("{", "{{").replace("}", "}}"))
                    if fname is None:
                        continue
                    if fname not in where:
                        ok = False
                        break
                    parts.append(f"{{{len(idx)}}}")
                    idx.append(where[fname])
                out.append(("".join(parts), idx) if ok else None)
            cache[key] = out
        return cache[key]


def load_templates(db_id: str, path: str | Path | None = None) -> TemplateSet:
    """Load ``assets/templates/<db_id>.yaml`` (or ``path``). Raises InputError when absent, malformed, or when a
    table has fewer than five templates."""
    p = Path(path) if path else assets_dir() / "templates" / f"{db_id}.yaml"
    if not p.exists():
        raise InputError(f"no verbalization templates for database {db_id!r}: write {p} "
                         f"(table: [at least {MIN_TEMPLATES} templates with {{column}} fields]), or generate a query "
                         f"set with templates: ctxbench questions generate --db DB --out FILE.yaml, then "
                         f"--queries FILE.yaml")
    data = read_yaml(p, "templates file") or {}  # a syntax error names its line and column
    return templates_from_mapping(data, db_id, str(p))


def missing_phrase(templates: TemplateSet | str | Path, table: str, column: str) -> str:
    """The phrase a template of ``table`` states where ``column`` is NULL: the ``missing:`` key of the templates
    (a :class:`TemplateSet`, or the path of a templates file), else "not recorded". Raises InputError for a file
    that :func:`load_templates` cannot read."""
    ts = templates if isinstance(templates, TemplateSet) else load_templates("", templates)
    return ts.missing_phrase(table, column)


def templates_from_mapping(data: Any, db_id: str, where: str) -> TemplateSet:
    """A TemplateSet from a mapping ``table -> [template, ...]`` read from ``where`` (a templates file, or the
    ``templates:`` section of a generated query set). Raises InputError naming ``where`` when it is not such a
    mapping, a template is malformed, or a table has fewer than five templates."""
    if not isinstance(data, dict) or not data:
        raise InputError(f"{where}: expected a mapping table -> list of templates")
    temps: dict[str, list[str]] = {}
    missing = data.get(MISSING_KEY)
    if isinstance(missing, dict):
        for table, cols in missing.items():
            if not isinstance(cols, dict) or not all(isinstance(p, str) and p.strip() for p in cols.values()):
                raise InputError(f"{where}: missing: {table!r} must map columns to phrases ({{table: {{column: "
                                 f"phrase}}}}, e.g. missing: {{weather: {{events: no event recorded}}}})")
        data = {k: v for k, v in data.items() if k != MISSING_KEY}
        missing = {str(t): {str(c): p.strip() for c, p in cols.items()} for t, cols in missing.items()}
    else:
        missing = {}
    if not data:
        raise InputError(f"{where}: expected a mapping table -> list of templates")
    for table, lst in data.items():
        if not isinstance(lst, list) or not all(isinstance(x, str) for x in lst):
            raise InputError(f"{where}: table {table!r} must map to a list of template strings")
        if len(lst) < MIN_TEMPLATES:
            raise InputError(f"{where}: table {table!r} has {len(lst)} templates; write at least {MIN_TEMPLATES}")
        for t in lst:
            template_fields(t)
        temps[str(table)] = [x.strip() for x in lst]
    return TemplateSet(db_id=db_id, templates=temps, path=where, missing=missing)
