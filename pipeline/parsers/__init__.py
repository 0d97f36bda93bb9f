"""One pure parser per log source: ``parse(text, ctx) -> FileParse``.

No IO, no Beam. High-volume sources select candidate lines with one vectorized polars
``str.contains`` over the whole file and run Python only on those; small files
(sacct, slurmctld, SEL, inventory, hosts.csv) are parsed line by line.
"""
