"""Running PyTorch's upstream test suites on metalx.

- expectations: known failures/skips as data, one file per torch minor version
- pytest_plugin: applies expectations, records outcomes and CPU-fallback use
- coverage: per-OpInfo attribution of fallback counts
- summary: result tables
- upstream: `python -m metalx.testing.upstream --pytorch-src PATH [files...]`
- subset: the fixed op list CI runs (configure() installs it via set_test_configs)
"""
