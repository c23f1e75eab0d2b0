"""Helpers the test modules share: building servers, MCP clients, processes and ports, spec strategies.

`build` turns a spec into a generated, published and importable server; `client` opens MCP clients in-process
or over stdio; `processes` holds free ports, waiting for them, and running subprocesses (the fusiongen CLI,
servers) with timeouts; `redis_server` starts a real redis-server; `containers` are the handler return types the
presenter tests share; `spec_strategies` writes hypothesis-generated specs as TOML and damages them.
"""
