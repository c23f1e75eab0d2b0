"""The static code of generated servers, as real Python: copied statement for statement into every server that needs it
(less the definitions that server cannot reach: codegen/prune.py).

Nothing here imports fusiongen, and fusiongen never imports these modules: they are source text to copy,
linted, type-checked and unit-tested as code. Modules import each other relatively, as they do in a server.
"""
