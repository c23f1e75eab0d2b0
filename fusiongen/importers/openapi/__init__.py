"""`fusiongen import openapi`: an OpenAPI 3.0/3.1 document → a spec region, and optionally an httpx handler module.

Phases, each a plain function: `document.load_document` (bytes → a `Document` that resolves `$ref`s and knows
where each JSON pointer is written), `mapping.map_document` (→ `Imported`: models, tools, diagnostics),
`emit.emit_spec` (→ TOML text, merged with what the user owns in an existing spec), `http_handlers` (→ the
handler module's text).
"""
