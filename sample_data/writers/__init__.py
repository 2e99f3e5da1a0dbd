"""One writer per ingest format, named like its parser in ``ingest/`` (``writers/sacct.py``
writes what ``ingest/formats/sacct/`` reads); shared pieces in ``base.py`` and ``bmc_common.py``.
Writers read the simulated fleet (``sample_data.model``) and never import a parser."""
