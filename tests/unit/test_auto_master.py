"""`master: auto`: a warm local server for a command typed at a terminal, the embedded driver otherwise (pure logic;
the terminal is a pseudo-terminal)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from dbt.adapters.ducklake.credentials import DuckLakeCredentials, auto_master

PROBE = "from dbt.adapters.ducklake.credentials import auto_master; print(auto_master())"


def _env(**set_: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "DBT_DUCKLAKE_WARM")}
    return {**env, **set_}


def _at_terminal(env: dict[str, str]) -> str:
    """auto_master() in a process whose stdin and stdout are a terminal."""
    main, child = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], stdin=child, stdout=child, stderr=subprocess.DEVNULL,
                              env=env, timeout=60, check=True)
        assert done.returncode == 0
        return os.read(main, 1000).decode().strip()
    finally:
        os.close(main)
        os.close(child)


def test_a_terminal_gets_the_warm_server() -> None:
    assert _at_terminal(_env()) == "local-server"


@pytest.mark.parametrize("env", [{"CI": "true"}, {"DBT_DUCKLAKE_WARM": "0"}])
def test_ci_or_opt_out_at_a_terminal_is_embedded(env: dict[str, str]) -> None:
    assert _at_terminal(_env(**env)) == "local[*]"


def test_no_terminal_is_embedded_unless_asked() -> None:
    run = [sys.executable, "-c", PROBE]
    plain = subprocess.run(run, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=_env(), check=True)
    assert plain.stdout.strip() == "local[*]"
    asked = subprocess.run(run, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           env=_env(DBT_DUCKLAKE_WARM="1"), check=True)
    assert asked.stdout.strip() == "local-server"


def test_the_profile_default_is_auto_and_an_explicit_master_stays() -> None:
    assert DuckLakeCredentials.from_dict({}).master == auto_master() == "local[*]"  # tests: DBT_DUCKLAKE_WARM=0
    assert DuckLakeCredentials.from_dict({"master": "local[2]"}).master == "local[2]"
