"""Building blocks every layer uses: the settings registry, a bounded cache, durable file
replacement, pre-encoded JSON and "did you mean" suggestions. They import no layer that uses
them (the settings registry reads time values and memory shares through `request.timevalue` and
`services.memory`, which import nothing above them)."""
