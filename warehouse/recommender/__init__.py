"""The recommender: which rented GPU fits a fine-tuning job (memory, models_catalog), at what real cost
(recommend, ranking), read from the warehouse with the SQL macros of `macros`."""
