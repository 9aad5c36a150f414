"""`python -m leafsearch serve ...`."""

from leafsearch.cli import main

main()
