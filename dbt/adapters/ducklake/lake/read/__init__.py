"""Reading tables: scan planning, pruning by statistics, delete files, inlined rows, change feeds."""
