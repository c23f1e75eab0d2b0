"""Bytes to a loaded spec: every file fusiongen reads about a spec (the TOML, XState JSON) is read here."""
