"""The differential fuzzer's long run: random operation sequences applied by our layers and by DuckDB 1.5 to three
lakes (ours, DuckDB's, mixed writers), every snapshot compared both ways (tests/support/fuzz.py says how).

Run: .venv/bin/python -m bench.fuzz [--seconds 900] [--length 14] [--seed 1000] [--backends duckdb,sqlite]
     [--report fuzz-report.txt]

Prints how many sequences and operations ran and every mismatch (the seed, the operations, both sides' rows): a
mismatch is reproduced with `--seed S --seconds 0 --sequences 1` and the same --length and backend.
"""

from __future__ import annotations

import argparse
import json
import time

from dbt.adapters.ducklake.spark.env.session import build_session
from tests.support.fuzz import run_sequences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=900.0, help="keep starting sequences until this much time passed")
    ap.add_argument("--sequences", type=int, default=0, help="or stop after this many (0: no limit)")
    ap.add_argument("--length", type=int, default=14, help="operations drawn per sequence")
    ap.add_argument("--seed", type=int, default=1000, help="the first sequence's seed (then +1 each)")
    ap.add_argument("--backends", default="duckdb,sqlite", help="catalog backends, alternating per sequence")
    ap.add_argument("--report", default=None, help="also write the mismatches to this file")
    args = ap.parse_args()
    spark = build_session("local[2]", "dbt-ducklake-fuzz", {"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    backends = tuple(args.backends.split(","))
    start = time.monotonic()
    seed, sequences, operations, mismatches = args.seed, 0, 0, []
    while True:
        n, ops, found = run_sequences(spark, [seed], args.length, backends=(backends[sequences % len(backends)],))
        sequences, operations, mismatches = sequences + n, operations + ops, mismatches + found
        for m in found:
            print(f"MISMATCH\n{m}\n", flush=True)
        seed += 1
        if (args.sequences and sequences >= args.sequences) or (
                not args.sequences and time.monotonic() - start >= args.seconds):
            break
    summary = {"sequences": sequences, "operations": operations, "mismatches": len(mismatches),
               "seconds": round(time.monotonic() - start, 1), "first_seed": args.seed, "length": args.length,
               "backends": list(backends)}
    print(json.dumps(summary), flush=True)
    if args.report:
        with open(args.report, "w") as f:
            f.write(json.dumps(summary) + "\n\n" + "\n\n".join(mismatches))
    spark.stop()


if __name__ == "__main__":
    main()
