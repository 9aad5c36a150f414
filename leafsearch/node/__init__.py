"""The node: one data folder, its indices and the services it builds and owns (`node.py`), its
`_nodes` info and stats (`stats.py`) and its slow logs (`slowlog.py`). The top of the engine: the
REST layer, the CLI and the in-process client call it; nothing below it imports it."""
