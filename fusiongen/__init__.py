"""fusiongen: compile a TOML spec of models, presenters and workflows into a standalone MCP server."""

__version__ = "0.1.0"
