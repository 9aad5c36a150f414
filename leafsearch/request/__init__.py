"""The request language: search, count and scroll bodies, the query DSL, sorts, rescore, time
values, index options, date math in index names and URL booleans, parsed into typed values
(`search_types.SearchRequest`) that the engine takes instead of JSON."""
