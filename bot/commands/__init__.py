"""One module per CLI command; each is a plain function returning an exit code."""
