"""The Beam ingest pipeline: log files in, normalized events out (``faultline.pipeline``).

Parsers are pure functions (one module per log source); transforms move file chunks
and events, never single raw lines; only the entry point touches options, files and
the database.
"""
