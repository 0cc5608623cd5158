"""The recommender: which rented GPU fits a fine-tuning job, at what real cost.

`memory` estimates what the job needs, `models_catalog` holds the built-in models, `recommend`
matches and costs the current offers, `macros` installs the SQL macros (`fits`, ...) on the
connection that uses them. It reads the warehouse; the store does not know it.
"""
