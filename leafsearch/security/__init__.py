"""Who may do what: users and API keys (stored hashed in the data folder), roles, and the
identity of the request being served. The HTTP checks that use them are in `rest/access.py`."""
