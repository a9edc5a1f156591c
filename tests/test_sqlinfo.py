"""Query types and difficulty (HoloBench appendix A.3.1-A.3.3) and the `ctxbench sql-info` command.

Expected values come from the paper (A.3.3 examples, copied with the paper's spelling `Appellation`; the PDF's
typographic quotes and `$<$` are written as plain SQL) or are worked out by hand from the A.3.2 rules."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxbench.cli import app
from ctxbench.core.errors import InputError
from ctxbench.questions.sqlinfo import sql_info

# (db, SQL, types, difficulty, tables) from appendix A.3.3; tables read off the SQL by hand
PAPER_EXAMPLES = [
    ("wine_1",
     "SELECT AVG(T2.Price) FROM appellations AS T1 JOIN wine AS T2 ON T1.Appellation = T2.Appellation "
     "WHERE T1.County = 'Sonoma'",
     ["Aggregation", "Join"], "medium", ["appellations", "wine"]),
    ("store_1",
     "SELECT COUNT(DISTINCT name) FROM tracks WHERE milliseconds > 720000",
     ["Aggregation", "Comparison"], "easy", ["tracks"]),
    ("college_2",
     "SELECT course.title, section.building FROM course JOIN section ON course.title = section.course_title "
     "JOIN classroom ON section.building = classroom.building WHERE classroom.capacity = "
     "(SELECT MAX(capacity) FROM classroom)",
     ["Max/Min", "Join"], "hard", ["classroom", "course", "section"]),
    ("flight_4",
     "SELECT airline_name, COUNT(*) AS active_routes FROM routes WHERE codeshare IS NULL GROUP BY airline_name "
     "ORDER BY active_routes DESC LIMIT 3",
     ["Aggregation", "Ranking"], "hard", ["routes"]),
    ("soccer_1",
     "SELECT player_name FROM Player WHERE height < 170",
     ["Comparison"], "easy", ["player"]),
]


@pytest.mark.parametrize("db,sql,types,diff,tables", PAPER_EXAMPLES, ids=[e[0] for e in PAPER_EXAMPLES])
def test_paper_examples(db, sql, types, diff, tables):
    info = sql_info(sql)
    assert info["query_types"] == types
    assert info["difficulty"] == diff
    assert info["tables"] == tables


def test_paper_wine_example_columns_resolved_through_aliases():
    info = sql_info(PAPER_EXAMPLES[0][1])
    assert info["columns"] == ["appellations.appellation", "appellations.county", "wine.appellation", "wine.price"]


# appendix A.3.1: one example per type
@pytest.mark.parametrize("sql,types", [
    ("SELECT SUM(sales) FROM transactions GROUP BY region", ["Aggregation"]),
    ("SELECT MAX(salary) FROM employees", ["Max/Min"]),
    ("SELECT employees.name, departments.name FROM employees INNER JOIN departments "
     "ON employees.department_id = departments.id", ["Join"]),
    ("SELECT * FROM products WHERE price BETWEEN 100 AND 200", ["Comparison"]),
    ("SELECT player_name FROM players ORDER BY score DESC LIMIT 10", ["Ranking"]),
])
def test_a31_type_examples(sql, types):
    assert sql_info(sql)["query_types"] == types


@pytest.mark.parametrize("sql", [
    "SELECT a FROM t WHERE b = 'x'",
    "SELECT a FROM t WHERE b != 'x'",
    "SELECT a FROM t WHERE b IN ('x', 'y')",
    "SELECT a FROM t WHERE b = c",
])
def test_string_or_column_comparisons_are_not_comparison(sql):
    assert "Comparison" not in sql_info(sql)["query_types"]


def test_equality_with_subquery_is_not_comparison():
    info = sql_info("SELECT a FROM t WHERE b = (SELECT MAX(b) FROM t)")
    assert info["query_types"] == ["Max/Min"]


@pytest.mark.parametrize("sql", [
    "SELECT a FROM t WHERE b BETWEEN 1 AND 3",
    "SELECT a FROM t WHERE b IN (1, 2, 3)",
    "SELECT a FROM t WHERE b = 5",
    "SELECT a FROM t WHERE b >= 2.5",
    "SELECT a FROM t WHERE 10 < b",
    "SELECT a FROM t WHERE b > -1",
])
def test_numeric_comparisons_are_comparison(sql):
    assert sql_info(sql)["query_types"] == ["Comparison"]


def test_comma_join_is_join():
    # module docstring: "a JOIN, or more than one table in one FROM"
    assert sql_info("SELECT a.x FROM a, b WHERE a.id = b.id")["query_types"] == ["Join"]


def test_query_types_come_in_fixed_order():
    sql = ("SELECT g.Color, AVG(w.Score) AS s, MIN(w.Price) FROM wine AS w JOIN grapes AS g ON w.Grape = g.Grape "
           "WHERE w.Price < 30 GROUP BY g.Color ORDER BY s DESC")
    assert sql_info(sql)["query_types"] == ["Aggregation", "Max/Min", "Join", "Comparison", "Ranking"]


@pytest.mark.parametrize("sql,diff", [
    # component-1 keywords only
    ("SELECT name FROM t", "easy"),
    ("SELECT name FROM t WHERE x > 1", "easy"),                                   # 1 keyword
    ("SELECT name FROM t WHERE x > 1 ORDER BY name", "medium"),                   # 2 keywords
    ("SELECT name FROM t WHERE x > 1 GROUP BY name ORDER BY name", "hard"),       # 3 keywords
    ("SELECT name FROM t WHERE name LIKE 'a%'", "medium"),                        # WHERE, LIKE
    ("SELECT name FROM t WHERE name LIKE 'a%' ORDER BY name", "hard"),            # WHERE, LIKE, ORDER BY
    ("SELECT name FROM t WHERE x > 1 OR x < 0", "medium"),                        # WHERE, OR; >1 condition
    # component 2
    ("SELECT name FROM t UNION SELECT name FROM u", "hard"),
    ("SELECT name FROM t INTERSECT SELECT name FROM u", "hard"),
    ("SELECT name FROM t EXCEPT SELECT name FROM u", "hard"),
    ("SELECT name FROM t WHERE x IN (SELECT x FROM u)", "hard"),
    # other complexity factors
    ("SELECT a, b FROM t", "easy"),                                               # 2 columns: no factor
    ("SELECT a, b, c FROM t", "medium"),                                          # >2 columns: 1 factor
    ("SELECT a FROM t WHERE x > 1 AND y > 2", "medium"),                          # 1 keyword, >1 condition
    ("SELECT a, b, c FROM t WHERE x > 1 ORDER BY a", "medium"),                   # 2 keywords, 1 factor
    ("SELECT a, b, c FROM t WHERE x > 1 AND y > 2", "hard"),                      # 2 factors
    ("SELECT COUNT(*), SUM(b), c FROM t", "hard"),                                # >1 aggregate, >2 columns
    ("SELECT a, COUNT(*) FROM t GROUP BY a, b", "medium"),                        # 1 keyword, >1 group column
])
def test_difficulty_boundaries(sql, diff):
    assert sql_info(sql)["difficulty"] == diff


def test_one_keyword_two_factors_is_hard_but_one_factor_is_medium():
    assert sql_info("SELECT a, b, c FROM t GROUP BY a, b, c")["difficulty"] == "hard"  # >2 columns, >1 group col
    assert sql_info("SELECT a, b, c FROM t GROUP BY a")["difficulty"] == "medium"


def test_unparsable_sql_raises_input_error_naming_it():
    with pytest.raises(InputError) as ei:
        sql_info("SELEC a FRM t")
    assert "SELEC a FRM t" in str(ei.value)


def test_cli_prints_json():
    sql = "SELECT T1.Name FROM Wine AS T1 JOIN Appellations AS T2 ON T1.Appelation = T2.Appelation WHERE T1.Price > 50"
    res = CliRunner().invoke(app, ["sql-info", sql])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"tables", "columns", "query_types", "difficulty"}
    assert out["tables"] == ["appellations", "wine"]
    assert out["columns"] == ["appellations.appelation", "wine.appelation", "wine.name", "wine.price"]
    assert out["query_types"] == ["Join", "Comparison"]
    assert out["difficulty"] == "medium"


def test_cli_unparsable_sql_exit_2_and_names_sql():
    sql = "SELEC a FRM t"
    res = CliRunner().invoke(app, ["sql-info", sql])
    assert res.exit_code == 2
    text = " ".join((res.output or "").split())
    assert "SELEC a FRM t" in text
    assert "error" in text.lower()


def test_correlated_subquery_resolves_outer_alias():
    info = sql_info("SELECT COUNT(*) FROM flights AS f WHERE EXISTS "
                    "(SELECT 1 FROM weather AS w WHERE w.month = f.month AND w.temp > 80)")
    assert info["columns"] == ["flights.month", "weather.month", "weather.temp"]
    assert info["tables"] == ["flights", "weather"]
    assert info["difficulty"] == "hard"  # a nested subquery is a component-2 keyword


# --- SQLite's double-quoted strings (issue 13 item 2): never listed as columns ---------------------------------

@pytest.mark.parametrize("sql,columns", [
    ('SELECT count(*) FROM airports WHERE city = "Mountain View"', ["airports.city"]),
    ('SELECT name FROM country WHERE continent = "Europe" AND Population = "80000"',
     ["country.continent", "country.name", "country.population"]),
    ('SELECT name FROM t WHERE code IN ("FR", "ES")', ["t.code", "t.name"]),
    ('SELECT name FROM t WHERE name LIKE "%an%"', ["t.name"]),
    ('SELECT name FROM t WHERE year BETWEEN "1990" AND "2000"', ["t.name", "t.year"]),
    ("SELECT T1.name FROM a AS T1 JOIN b AS T2 ON T1.id = T2.a_id WHERE T2.lang = \"English\"",
     ["a.id", "a.name", "b.a_id", "b.lang"]),
])
def test_double_quoted_values_are_not_columns_without_schema(sql, columns):
    info = sql_info(sql)
    assert info["columns"] == columns
    # the CLI prints the same
    res = CliRunner().invoke(app, ["sql-info", sql])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["columns"] == columns


def test_double_quoted_names_resolve_against_the_schema():
    schema = {"t": ["name", "France", "country"]}
    # "France" names a column of t here, so SQLite reads it as one; "Spain" is no column: a string
    assert sql_info('SELECT name FROM t WHERE country = "France"', schema)["columns"] == [
        "t.country", "t.france", "t.name"]
    assert sql_info('SELECT name FROM t WHERE country = "Spain"', schema)["columns"] == ["t.country", "t.name"]
    # a double-quoted name in the SELECT list: a column when the table has it, else a string
    assert sql_info('SELECT "name", "hello" FROM t', schema)["columns"] == ["t.name"]
    # without a schema the SELECT list keeps it as a column (only value positions are read as strings)
    assert sql_info('SELECT "name" FROM t')["columns"] == ["t.name"]
    # a SELECT alias is a name in scope
    assert sql_info('SELECT count(*) AS "n" FROM t ORDER BY "n"', schema)["columns"] == []


def test_sql_info_db_resolves_columns_of_the_preprocessed_view(spider_db):
    """`ctxbench sql-info --db` (issue 22): a generated question's name column (flights.DestAirport replaced by the
    airport's name, as `questions generate` writes it) resolves to the preprocessed view and says what it stands
    for; a column of the file resolves to the database; a column in neither is listed as unknown."""
    import json as _json

    from typer.testing import CliRunner

    from ctxbench.cli import app

    db = spider_db("flight_2")
    sql = ("SELECT count(*) FROM flights WHERE DestAirport_airportname = 'Municipal' AND Airline = 1 "
           "AND flights.nosuch = 2")
    r = CliRunner().invoke(app, ["sql-info", "--db", str(db), sql])
    assert r.exit_code == 0, r.output
    out = _json.loads(r.output)
    assert out["resolved"]["flights.destairport_airportname"] == {
        "in": "preprocessed view", "column": "DestAirport_airportname",
        "stands_for": "flights.DestAirport -> airports.AirportName (the referenced row's name)"}
    assert out["resolved"]["flights.airline"] == {"in": "database", "column": "Airline"}
    assert out["unknown"] == ["flights.nosuch"]
    # without --db the object is sql-info's usual one
    plain = _json.loads(CliRunner().invoke(app, ["sql-info", sql]).output)
    assert "resolved" not in plain and plain["columns"] == out["columns"]
