"""Building blocks every layer uses: the settings registry, a bounded cache, durable file
replacement, pre-encoded JSON and "did you mean" suggestions. Nothing here imports another
leafsearch package except `leafsearch.errors`."""
