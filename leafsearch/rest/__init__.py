"""The Elasticsearch REST API over HTTP: one ASGI dispatcher (`app.py`), the route table
(`routes.py`), access checks (`access.py`), request/response exchange, rendering and the handlers,
which call the node. Nothing below it imports it."""
