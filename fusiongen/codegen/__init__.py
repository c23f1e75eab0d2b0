"""The IR to generated text, purely: views, templates for what depends on the spec, runtime copies, ruff."""
