"""A loaded spec to the IR and its diagnostics: one module per concept, each a function of what came before."""
