"""The `dprelease` command line: one module per command group (`app` assembles them)."""
