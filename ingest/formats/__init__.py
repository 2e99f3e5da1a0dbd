"""One module per input format, each declaring ``FORMAT`` (``ingest.base.FormatSpec``); a big
format is a package whose ``__init__`` declares it. ``ingest.registry`` finds them all here.
Parsers are pure and do not import each other; what two formats share lives one level up, in
``ingest/`` (times, host lists, BMC and XID catalogs, CSV records)."""
