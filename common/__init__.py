"""Small pieces every app may import, importing none of them: error types (`errors`), bounded
API inputs (`inputs`), outbound network guards (`netguard`, `safe_http`), the append-only
trigger (`append_only`), the values the log filter redacts (`secret_values`) and the worker's
host name (`worker_host`)."""
