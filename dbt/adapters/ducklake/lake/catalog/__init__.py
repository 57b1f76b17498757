"""The catalog database: connections and backends, the catalog's own DDL, a snapshot's state."""
