"""The benchmark suite (`make bench`, `make bench-quick`): bench/run.py orchestrates one module per measurement."""
