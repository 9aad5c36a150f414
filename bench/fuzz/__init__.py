"""A seeded fuzzer over every endpoint of the route table (`bodies.py`: what is sent,
`requests.py`: which request, `run.py`: the run and its checks), used by tests/test_fuzz.py and
bench/fuzz_memory.py."""
