"""Answers without a Spark job where statistics or the driver suffice, and the pruned reads planned from statistics."""
