"""Everything that formats output: rich tables, JSON documents, plots, the timeline."""
