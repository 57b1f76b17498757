"""Maintenance with the reference's semantics: compaction, snapshot expiry, file cleanup."""
