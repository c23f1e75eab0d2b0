"""Handlers of the catalogue MCP server: it has no tools, so there is nothing to implement."""
