"""Search worker processes: searches run on every core (pool.py, process.py, mirror.py, wire.py)."""
