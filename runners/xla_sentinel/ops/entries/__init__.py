"""The op table's entries: one module per op category and one per program-shape family
(SHAPE_FAMILIES), each listing its `OpDef`s in `ENTRIES` beside their planners and numpy
forms. None imports jax: an entry's lax form is the builder of its name in ops/lax_builders.py."""
