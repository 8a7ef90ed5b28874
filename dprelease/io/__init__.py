"""The real table in and out of memory: reading, validating against the public schema,
streaming in chunks, and counting on Dask."""
