"""The offline tools: `plan`, `preflight`, `lint`, `simulate` and `stats`."""
