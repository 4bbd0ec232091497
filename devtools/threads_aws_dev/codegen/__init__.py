"""The validator code generator behind `schema_gen` and `host/bodies_gen` (dev-only: generation
time, never in the layer): `nodes` normalises schemas, `exprs` compiles boolean expressions,
`emit` writes statements; `emit.Gen` is the generator."""
