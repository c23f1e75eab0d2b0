"""Importers: documents other tools wrote (OpenAPI) → fusiongen spec text. They never build anything."""
