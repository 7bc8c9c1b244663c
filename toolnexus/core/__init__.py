"""The pure core: wire codecs, the exchange flow, transcripts, tools and toolkits (no I/O)."""
