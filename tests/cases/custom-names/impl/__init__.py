"""The package holding the handler module `impl.ops` of the my-tools MCP server."""
