"""What the telemetry steps' DuckDB SQL is built from: typed views of a table's Parquet files,
literals, and the columns that identify one series."""

from pathlib import Path

from warehouse.schemas import TABLES
from warehouse.store import duck_type
from warehouse.store import literal_path

# one time series of gpu_samples: a metric of one GPU (its UUID included) on one host
SERIES = ("cluster", "host", "gpu", "uuid", "metric")
SERIES_SQL = ", ".join(SERIES)


def files_view(table: str, files: list[str], columns: tuple[str, ...]) -> str:
    """``columns`` of some of ``table``'s Parquet ``files`` with their declared types; a column
    an older file lacks reads as null (no file: no rows)."""
    types = {c: duck_type(TABLES[table].columns[c]) for c in columns}
    typed = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in types.items())
    if not files:
        return f"SELECT {typed} WHERE false"
    cast = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in types.items())
    return (
        f"SELECT {cast} FROM (SELECT * FROM read_parquet({sql_list(files)}, union_by_name = true, "
        f"hive_partitioning = false) UNION ALL BY NAME SELECT {typed} WHERE false)"
    )


def sql_list(paths: list[str]) -> str:
    """Files as a DuckDB list literal, each read as named (never as a glob)."""
    return "[" + ", ".join(sql_str(literal_path(p)) for p in paths) + "]"


def sql_values(values) -> str:
    """``values`` as the comma-separated DuckDB string literals of an ``IN (...)`` list."""
    return ", ".join(sql_str(v) for v in values)


def sql_str(text: str | Path) -> str:
    """A DuckDB string literal."""
    return "'" + str(text).replace("'", "''") + "'"
