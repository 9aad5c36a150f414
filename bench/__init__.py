"""Benchmarks of leafsearch against its goals and a SQLite baseline on the same rows: `python -m bench`."""
