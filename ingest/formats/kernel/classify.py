"""Classification: what each candidate line is (XID, SXID, host fault, GPU identity, boot
banner, damaged record or nothing) and the fields it carries."""

import polars as pl

from .patterns import CLOCK
from .patterns import EDAC
from .patterns import GPU_AT
from .patterns import MCE
from .patterns import MLX5
from .patterns import NVME
from .patterns import SXID
from .patterns import XID

# kinds of candidate lines that are records (a row or a quarantine row each); the others
# (``gpu_at`` identity lines, ``boot_clock`` banners, reltime headers) only inform them
RECORD_KINDS = ["xid", "sxid", "host", "bad_xid", "bad_sxid", "bad_nul"]


# struct column -> (the literal a line must hold, the regex whose groups it holds)
_PARTS = {
    "_s": ("nvidia-nvswitch", SXID), "_m": ("mlx5_core ", MLX5), "_mce": ("mce: ", MCE),
    "_ed": ("EDAC ", EDAC), "_nv": ("nvme", NVME), "_ga": ("NVRM: GPU at", GPU_AT),
    "_cl": ("setting system clock", CLOCK),
}  # fmt: skip


def _with_parts(df: pl.DataFrame) -> pl.DataFrame:
    """Each regex runs once, and only on lines holding its literal: the groups are materialised
    (``_PARTS``, ``_x`` and the XID message ``_xmsg``) before the many expressions that read
    them."""
    body = pl.col("body")
    after_xid = body.str.split_exact("NVRM: Xid", 1).struct.field("field_1")
    return df.with_columns(
        _x=after_xid.str.extract_groups(XID),
        _xa=after_xid,
        **{
            k: pl.when(body.str.contains(lit, literal=True)).then(body).str.extract_groups(rx)
            for k, (lit, rx) in _PARTS.items()
        },
    ).with_columns(_xmsg=pl.col("_xa").str.slice(pl.col("_x").struct.field("head").str.len_chars()))


def _host_code(m: pl.Expr, mce: pl.Expr, ed: pl.Expr, nv: pl.Expr) -> pl.Expr:
    """The ``HOST_FAULTS`` code of an mlx5, machine check, EDAC or NVMe line, else null."""
    mlx_msg = m.struct.field("msg")
    mce_msg = mce.struct.field("msg")
    return (
        pl.when(mlx_msg.str.contains(r"(?i)\blink down\b"))
        .then(pl.lit("mlx5_link_down"))
        .when(mlx_msg.str.contains(r"(?i)port module event\[error\]"))
        .then(pl.lit("mlx5_port_module_error"))
        .when(
            mce_msg.str.contains(
                r"(?i)machine check exception|machine check: processor context corrupt"
            )
        )
        .then(pl.lit("mce"))
        .when(mce_msg.str.contains(r"(?i)machine check events logged"))
        .then(pl.lit("mce_corrected"))
        .when(ed.struct.field("kind") == "UE")
        .then(pl.lit("edac_ue"))
        .when(nv.struct.field("dev").is_not_null())
        .then(pl.lit("nvme_controller_down"))
    )


def _kind(x: pl.Expr, s: pl.Expr, ga: pl.Expr, host_code: pl.Expr) -> pl.Expr:
    """What a line is: a fault (xid, sxid, host), a damaged fault line (bad_xid, bad_sxid), a
    GPU identity line (gpu_at), a boot banner (boot_clock, boot_start) or nothing (null)."""
    body = pl.col("body")
    xid_like = body.str.contains("NVRM: Xid")
    sxid_like = body.str.contains(r"nvidia-nvswitch\d+: SX[Ii][Dd]")
    return (
        pl.when(x.struct.field("code").is_not_null())
        .then(pl.lit("xid"))
        .when(xid_like)
        .then(pl.lit("bad_xid"))
        .when(s.struct.field("code").is_not_null())
        .then(pl.lit("sxid"))
        .when(sxid_like)
        .then(pl.lit("bad_sxid"))
        .when(host_code.is_not_null())
        .then(pl.lit("host"))
        .when(ga.struct.field("uuid").is_not_null())
        .then(pl.lit("gpu_at"))
        .when(pl.col("_cl").struct.field("epoch").is_not_null())
        .then(pl.lit("boot_clock"))
        .when(body.str.starts_with("Linux version "))
        .then(pl.lit("boot_start"))
    )


def classify(df: pl.DataFrame) -> pl.DataFrame:
    """Per candidate line: kind (xid/sxid/host fault/identity/None) and its fields."""
    df = _with_parts(df)
    x, s, m, mce, ed, nv, ga = (pl.col(k) for k in ("_x", "_s", "_m", "_mce", "_ed", "_nv", "_ga"))
    mlx_msg = m.struct.field("msg")
    mce_msg = mce.struct.field("msg")
    pid = x.struct.field("pid")
    pname = x.struct.field("pname").str.strip_chars()
    host_code = _host_code(m, mce, ed, nv)
    sev_word = s.struct.field("msg").str.extract(r"^(?i)(fatal|non-?fatal)\b").str.to_lowercase()
    edac_on = ed.struct.field("msg").str.extract(r"\bon (\S+)")
    return df.with_columns(
        kind=_kind(x, s, ga, host_code),
        code=pl.coalesce(x.struct.field("code"), s.struct.field("code"), host_code),
        pci_raw=pl.coalesce(
            x.struct.field("pci"),
            s.struct.field("pci"),
            m.struct.field("pci"),
            ga.struct.field("pci"),
        ),
        message=pl.coalesce(
            pl.col("_xmsg"),
            s.struct.field("msg"),
            mlx_msg,
            mce_msg,
            pl.concat_str(
                ed.struct.field("n"),
                pl.lit(" "),
                ed.struct.field("kind"),
                pl.lit(" "),
                ed.struct.field("msg"),
            ),
            nv.struct.field("msg"),
        ),
        component_id=pl.coalesce(
            s.struct.field("dev"),
            m.struct.field("ifname"),
            mce_msg.str.extract(r"^(CPU \d+)"),
            pl.coalesce(edac_on, ed.struct.field("mc")),
            nv.struct.field("dev"),
        ),
        pid=pl.when(pid.str.contains(r"^\d+$")).then(pid.cast(pl.Int64, strict=False)),
        process=pl.when(
            pname.is_not_null() & ~pname.is_in(["<unknown>", "'<unknown>'", "N/A", ""])
        ).then(pname),
        uuid_at=ga.struct.field("uuid"),
        sxid_severity=pl.when(sev_word == "fatal")
        .then(pl.lit("fatal"))
        .when(sev_word.is_not_null())
        .then(pl.lit("warning")),
        epoch=pl.col("_cl").struct.field("epoch"),
    ).drop(*_PARTS, "_x", "_xa", "_xmsg")
