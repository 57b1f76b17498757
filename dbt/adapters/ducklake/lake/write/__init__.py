"""Writing: transactions, staged operations, the catalog rows of a commit, data files and their stats."""
