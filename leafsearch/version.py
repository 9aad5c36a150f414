"""The Elasticsearch version leafsearch reports: an 8.x number the official 8 and 9 clients accept."""

VERSION = "8.17.0"
LUCENE_VERSION = "9.12.0"
