"""Spark writes as lake files, DML as delete files, and the unit of work (`work.LakeWork`) that commits them as one
snapshot."""
