"""anyattn.report: anyattn beside the attention kernels a team uses today, measured on the machine
at hand, written as one folder (report.md, a self-contained report.html, plots, CSV and JSON).

    python -m anyattn.report [--out DIR] [--quick] [--cases ...] [--tune]     (or: anyattn report ...)

cli.py runs it; workloads.py and measure.py measure; peer.py is the peers' interface, peers.py and
peers_paged.py hold the peers; render.py, plots.py and tables.py write the report; tune.py runs the
tuning campaign.
"""
