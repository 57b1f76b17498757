"""Hosts on this machine for multi-host tests: each its own network namespace (one veth on a private bridge, its own
address) and its own mount namespace (a private tmpfs over the rig's folder, so no host sees another's files).

A host is a long-lived `sleep` started by `unshare --net --mount`; everything that runs "on" the host is entered into
its namespaces with `nsenter`. The bridge lives in a namespace of its own (the switch), so no address of this machine's
own network is touched, and the rig goes away with its processes: killing the hosts' init processes frees their
namespaces and veths. Rigs of concurrent test runs use the same addresses without meeting (separate switches).

What a host can see: the machine's installed software (the repository, the virtualenv, Java, the jar cache) and its
own folder `<root>/<name>` (its working directory, TMPDIR and Spark's local dirs); the other hosts' folders are under
the tmpfs it mounted over `<root>`. The test process sees `<root>` empty: it reaches a host's files only through
`Host.run`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.231.0"


class HostError(RuntimeError):
    """A host or a command on it failed."""


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise HostError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def _die_with_parent() -> None:
    """In a child before exec: SIGKILL it when the test process dies, so that a killed test run leaves no host
    behind (the namespaces go with their last process)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child_pid(pid: int, timeout: float = 10.0) -> int:
    """The process `unshare --fork` started (it runs in the new namespaces; unshare itself does not)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = _sh("pgrep", "-P", str(pid), check=False).stdout.split()
        if out:
            return int(out[0])
        time.sleep(0.05)
    raise HostError(f"unshare (pid {pid}) started no process")


@dataclass
class Host:
    """One host: its name, address, folder and the pid holding its namespaces."""

    name: str
    ip: str
    root: Path  # the rig's folder (a private tmpfs on each host)
    pid: int
    unshare_pid: int  # the `unshare` that made the namespaces: in them too, and its death takes the host down
    veth: str  # the switch's end of the host's link
    switch_pid: int
    log_dir: Path
    installed: Mapping[str, str] = field(default_factory=dict)  # variables naming the machine's installed software
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def home(self) -> Path:
        """The host's own folder: its working directory and temporary files."""
        return self.root / self.name

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a process on the host: temporary files and Spark's local dirs in its own folder."""
        tmp = str(self.home / "tmp")
        return {**os.environ, "TMPDIR": tmp, "SPARK_LOCAL_DIRS": tmp, "SPARK_LOCAL_IP": self.ip,
                "SPARK_LOCAL_HOSTNAME": self.ip, "HOME": str(self.home), **self.installed, **(extra or {})}

    def _enter(self, argv: Sequence[str], cwd: str | None) -> list[str]:
        # a shell changes directory once inside: nsenter's own --wd opens the directory before it enters the mount
        # namespace, where the host's folder does not exist
        return ["nsenter", "-t", str(self.pid), "-n", "-m", "--", "sh", "-c", 'cd "$0" && exec "$@"',
                str(cwd or self.home), *argv]

    def popen(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> subprocess.Popen[bytes]:
        """A long-running process on the host (its own session), its output in <log_dir>/<host>-<name>.log."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{self.name}-{name}.log", "ab") as log:
            proc = subprocess.Popen(self._enter(argv, cwd), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=self.env(env), cwd="/", start_new_session=True,
                                    preexec_fn=_die_with_parent)
        self.processes.append(proc)
        return proc

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
            input: str | None = None, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command on the host, waited for; its output (text)."""
        proc = subprocess.run(self._enter(argv, cwd), input=input, capture_output=True, text=True,
                              env=self.env(env), cwd="/", timeout=timeout)
        if check and proc.returncode != 0:
            raise HostError(f"on {self.name}: {' '.join(argv)} exited with {proc.returncode}:\n"
                            f"{(proc.stdout + proc.stderr)[-20000:]}")
        return proc

    def write(self, path: str | Path, text: str) -> None:
        """A file on the host (path relative to its folder, or absolute in its view)."""
        target = Path(path) if Path(path).is_absolute() else self.home / path
        self.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", str(target)], input=text)

    def exists(self, path: str | Path) -> bool:
        return self.run(["test", "-e", str(path)], check=False).returncode == 0

    def files(self, under: str | Path = "") -> list[str]:
        """Every file under a folder of the host (its own folder by default), relative to it."""
        base = Path(under) if Path(under).is_absolute() else self.home / under
        out = self.run(["find", str(base), "-type", "f"], check=False).stdout.split()
        return sorted(os.path.relpath(p, base) for p in out)

    def pids(self) -> list[int]:
        """Every process on the host but its init (found through the mount namespace it holds)."""
        try:
            mine = os.readlink(f"/proc/{self.pid}/ns/mnt")
        except OSError:  # the host is gone, and its processes with it
            return []
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (self.pid, self.unshare_pid):
                continue
            with suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/mnt") == mine:
                    found.append(int(entry))
        return found

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Send sig to every process on the host (a machine that dies); the pids signalled."""
        pids = self.pids()
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def cut(self) -> None:
        """Unplug the host's cable: its link on the switch goes down (the host keeps running)."""
        _sh("nsenter", "-t", str(self.switch_pid), "-n", "ip", "link", "set", self.veth, "down")

    def plug(self) -> None:
        _sh("nsenter", "-t", str(self.switch_pid), "-n", "ip", "link", "set", self.veth, "up")

    def logs(self, lines: int = 40) -> str:
        parts = []
        for p in sorted(self.log_dir.glob(f"{self.name}-*.log")):
            text = p.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {p.name} (last {lines} lines) ---\n" + "\n".join(text))
        return "\n".join(parts)


@dataclass
class Network:
    """The switch and the hosts on it. `stop()` kills every process on every host, then the namespaces' holders."""

    root: Path
    log_dir: Path
    switch_pid: int = 0
    hosts: dict[str, Host] = field(default_factory=dict)
    _holders: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _holder(self, setup: str) -> tuple[int, int]:
        """(the process holding new namespaces, the unshare that made them)"""
        proc = subprocess.Popen(["unshare", "--net", "--mount", "--propagation", "private", "--fork",
                                 "--kill-child=SIGKILL", "sh", "-c", f"{setup}exec sleep infinity"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)
        self._holders.append(proc)
        return _child_pid(proc.pid), proc.pid

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.switch_pid = self._holder("")[0]
        _sh("nsenter", "-t", str(self.switch_pid), "-n", "ip", "link", "add", "br0", "type", "bridge")
        _sh("nsenter", "-t", str(self.switch_pid), "-n", "ip", "link", "set", "br0", "up")

    def add(self, name: str, installed: Mapping[str, str] | None = None) -> Host:
        """A new host on the switch, at the next address, with its own folder in its private tmpfs (its HOME too);
        `installed`: variables that name software installed outside HOME (as a host image would carry it)."""
        ip = f"{SUBNET}.{10 + len(self.hosts)}"
        home = self.root / name
        pid, unshare_pid = self._holder(f"mount -t tmpfs -o size=4g,mode=755 rig '{self.root}' && "
                           f"mkdir -p '{home}/tmp' && chmod 1777 '{home}/tmp' && ")
        # the host's end is named in the host's namespace; the switch's end needs a name unique on this machine
        # while it is created here (root namespace), before it moves into the switch
        veth = f"dlk{pid}"[:15]
        _sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
        _sh("ip", "link", "set", veth, "netns", str(self.switch_pid))
        _sh("nsenter", "-t", str(self.switch_pid), "-n", "ip", "link", "set", veth, "master", "br0", "up")
        for cmd in (["ip", "addr", "add", f"{ip}/24", "dev", "eth0"], ["ip", "link", "set", "eth0", "up"],
                    ["ip", "link", "set", "lo", "up"]):
            _sh("nsenter", "-t", str(pid), "-n", *cmd)
        host = Host(name, ip, self.root, pid, unshare_pid, veth, self.switch_pid, self.log_dir, dict(installed or {}))
        self.hosts[name] = host
        return host

    def stop(self) -> None:
        """Everything goes, whatever fails on the way (a host already gone, a process that will not wait)."""
        for host in self.hosts.values():
            with suppress(OSError):
                host.kill_all()
            for proc in host.processes:  # each leads its own session
                with suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._holders:
            with suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for host in self.hosts.values():
            for proc in host.processes:
                with suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
