"""Starting or joining Spark: sessions (embedded, cluster, Connect), the warm local server and its supervisor, the
driver's class archive, the S3 connector jars."""
