"""The ops the generator draws: specs (spec.py, entries/), their numpy forms (numpy_forms.py,
beside each entry) and their jax.lax builders (lax_builders.py, the only module here that
imports jax), assembled into the table (table.py) and the oracle's rules (exact.py, rules.py)."""
