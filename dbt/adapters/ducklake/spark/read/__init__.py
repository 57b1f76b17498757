"""Lake tables as Spark relations: scans, manifests, file listings, the first reader of a large table, type readings,
names bound to a snapshot, the change feed."""
