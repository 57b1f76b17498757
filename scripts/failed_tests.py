"""Print the failed and errored tests of a pytest JUnit XML report, one line each with the first line of the message.

The test command prints this last so that a CI log's tail names what failed even when an assertion's diff is long.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def main(report: str) -> int:
    failed = 0
    for case in ET.parse(report).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is None:
                continue
            failed += 1
            message = (found.get("message") or "").strip().splitlines()
            first = message[0][:300] if message else ""
            print(f"{outcome.upper()}: {case.get('classname')}::{case.get('name')}: {first}")
    return failed


if __name__ == "__main__":
    print(f"{main(sys.argv[1])} failed or errored")
