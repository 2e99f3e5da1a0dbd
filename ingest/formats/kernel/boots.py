"""Boot detection: the boot each uptime-stamped line belongs to, and when that boot began."""

from datetime import UTC
from datetime import datetime

import polars as pl

from ingest.base import ParseContext


def _to_datetime(v) -> datetime | None:
    """An ISO string or datetime; zone-aware values are converted to naive UTC."""
    if v is None:
        return None
    t = v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


def boot_times(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """``boot`` per line: the boot the latest ``setting system clock to ... (epoch)`` banner
    above it in the same boot dates (banner clock minus banner uptime), else
    ``ctx.options['boot_time']``, else ``ctx.time``. A new boot starts at a ``Linux version``
    line or where the uptime goes backwards."""
    fallback = _to_datetime(ctx.options.get("boot_time")) or ctx.time
    fb = pl.lit(fallback, dtype=pl.Datetime("us"))
    banners = df.filter((pl.col("kind") == "boot_clock") & pl.col("up_us").is_not_null())
    if banners.height == 0:
        return df.with_columns(boot=fb)
    prev_up = pl.col("up_us").shift(1).forward_fill()
    restart = (pl.col("kind") == "boot_start") | (pl.col("up_us") < prev_up).fill_null(False)
    df = df.with_columns(_boot_no=restart.cum_sum())
    clock_us = pl.col("epoch").cast(pl.Int64, strict=False) * 1_000_000
    banners = df.filter((pl.col("kind") == "boot_clock") & pl.col("up_us").is_not_null()).select(
        "line", "_boot_no", b_boot=pl.from_epoch(clock_us - pl.col("up_us"), time_unit="us")
    )
    df = df.join_asof(
        banners, on="line", by="_boot_no", strategy="backward", check_sortedness=False
    )
    return df.with_columns(boot=pl.coalesce("b_boot", fb)).drop("_boot_no", "b_boot")
