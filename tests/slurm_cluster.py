"""A real single-node Slurm on loopback, for the tests and ``make bench``.

    python -m tests.slurm_cluster    # start one, print its ATTUNE_SLURM_* settings; Ctrl-C stops

slurmctld, slurmd and slurmrestd from the distribution's packages (Debian 12: Slurm 22.05), with
munged, all in one temporary directory: no systemd, no cgroups (``proctrack/linuxproc``,
``task/none``), no accounting, a JWT key for ``auth/jwt``. munged runs as the ``munge`` user and
slurmrestd as ``nobody`` (slurmrestd refuses root) with ``-a rest_auth/jwt`` and
``SLURM_JWT=daemon``. Missing packages are installed with apt-get when running as root; where
they cannot be, ``ClusterUnavailable`` says how to install them. ``stop`` cancels every job,
waits for them to end, stops the daemons and removes the directory: nothing is left running.
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmrestd", "munge", "slurm-wlm-jwt-plugin")
BINARIES = ("slurmctld", "slurmd", "slurmrestd", "munged", "scontrol", "srun", "squeue", "scancel")
INSTALL_HINT = (
    "the Slurm tests need a real Slurm: as root, `apt-get update && apt-get install -y "
    "--no-install-recommends " + " ".join(PACKAGES) + "` (Debian 12: Slurm 22.05)"
)
API_PLUGINS = "openapi/v0.0.37,openapi/v0.0.38"
GPU_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")
GPUS = len(GPU_FILES)
"""GPUs the node declares, as generic resources over harmless character devices: GPU requests
and their accounting take Slurm's real path on a machine without GPUs (no launch uses them)."""
"""What slurmrestd serves: two versions, so the client must pick the one it speaks."""


class ClusterUnavailable(RuntimeError):
    """Slurm cannot run here; the message says how to make it run."""


def _missing() -> list[str]:
    sbin = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [b for b in BINARIES if shutil.which(b, path=sbin) is None]


def ensure_packages() -> None:
    """Install the Slurm packages when they are missing (root only, a few seconds)."""
    if not _missing():
        return
    if os.geteuid() != 0:
        raise ClusterUnavailable(f"{', '.join(_missing())} missing and not root; {INSTALL_HINT}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    for command in ([], ["apt-get", "update", "-q"]):
        if command:
            subprocess.run(command, env=env, capture_output=True, check=False)
        done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
        if done.returncode == 0 and not _missing():
            return
    raise ClusterUnavailable(
        f"apt-get could not install Slurm ({done.stderr[-300:]}); {INSTALL_HINT}"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SLURM_CONF = """\
ClusterName=attune-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={dir}/jwt.key
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=1
JobRequeue=0
KillWait=2
MinJobAge=3600
InactiveLimit=0
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """One running loopback cluster (``start``), its settings and some admin commands."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="attune-slurm-"))
        self.dir.chmod(0o755)  # munged and slurmrestd run as other users
        self.host = socket.gethostname().split(".")[0]
        self.user = getpass.getuser()
        self.conf = self.dir / "slurm.conf"
        self.restd_port = _free_port()
        self.url = f"http://127.0.0.1:{self.restd_port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.token = ""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def settings(self, **over: str) -> dict[str, str]:
        """The ``ATTUNE_SLURM_*`` variables that point attune at this cluster."""
        base = {
            "ATTUNE_SLURM_URL": self.url,
            "ATTUNE_SLURM_USER": self.user,
            "ATTUNE_SLURM_TOKEN_FILE": str(self.dir / "token"),
            "ATTUNE_SLURM_RETRY_WAIT_S": "0.2",
            "ATTUNE_SLURM_POLL_S": "0.25",
        }
        return {**base, **over}

    # --- lifecycle ---

    def start(self, timeout_s: float = 60.0) -> SlurmCluster:
        """Start every daemon, or stop what started and raise."""
        try:
            return self._start(time.monotonic() + timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, deadline: float) -> SlurmCluster:
        for sub in ("munge", "state", "spool", "log"):
            (self.dir / sub).mkdir()
        munge = self.dir / "munge"
        (munge / "munge.key").write_bytes(secrets.token_bytes(1024))
        (self.dir / "jwt.key").write_bytes(secrets.token_bytes(32))
        (self.dir / "jwt.key").chmod(0o600)
        shutil.chown(munge, "munge", "munge")
        shutil.chown(munge / "munge.key", "munge", "munge")
        (munge / "munge.key").chmod(0o400)
        self._spawn(
            "munged",
            [
                *("runuser", "-u", "munge", "--", "munged", "--foreground"),
                *(f"--socket={munge}/munge.socket", f"--key-file={munge}/munge.key"),
                *(f"--pid-file={munge}/munged.pid", f"--seed-file={munge}/seed"),
                f"--log-file={munge}/munged.log",
            ],
        )
        self._until(lambda: (munge / "munge.socket").exists(), deadline, "munged")
        # GPUs backed by character devices that every Linux has: Slurm schedules, binds
        # (CUDA_VISIBLE_DEVICES) and accounts them like real ones, without a GPU
        (self.dir / "gres.conf").write_text(
            "".join(f"NodeName={self.host} Name=gpu File={dev}\n" for dev in GPU_FILES)
        )
        self.conf.write_text(
            SLURM_CONF.format(
                gpus=GPUS,
                dir=self.dir,
                host=self.host,
                ctld_port=_free_port(),
                slurmd_port=_free_port(),
                cpus=max(4, os.cpu_count() or 1),
            )
        )
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["slurmd", "-D"])
        self._until(lambda: self.node_state() in ("idle", "idle*"), deadline, "the node (sinfo)")
        self.token = self.make_token(self.user)
        (self.dir / "token").write_text(self.token + "\n")
        (self.dir / "token").chmod(0o600)
        self.start_restd(deadline)
        return self

    def start_restd(self, deadline: float | None = None) -> None:
        deadline = deadline or time.monotonic() + 30
        self._spawn(
            "slurmrestd",
            [
                *("runuser", "-u", "nobody", "--", "slurmrestd", "-a", "rest_auth/jwt"),
                *("-s", API_PLUGINS, f"127.0.0.1:{self.restd_port}"),
            ],
            env={"SLURM_JWT": "daemon"},
        )
        self._until(self._restd_up, deadline, "slurmrestd")

    def stop_restd(self) -> None:
        self._terminate("slurmrestd")

    def stop(self) -> None:
        """Cancel every job, wait for them to end, stop the daemons, remove the directory."""
        try:
            if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
                self.run("scancel", f"--user={self.user}", check=False)
                self._until(lambda: not self.run("squeue", "-h").strip(), time.monotonic() + 20)
        except (TimeoutError, OSError):
            pass
        finally:
            # no job is left: the daemons stop together (slurmrestd and munged take ~2 s)
            self._terminate("slurmrestd", "slurmd", "slurmctld", "munged")
            self._kill_strays()
            shutil.rmtree(self.dir, ignore_errors=True)

    # --- admin commands ---

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def make_token(self, user: str, lifespan_s: int = 7200) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}")
        return out.strip().removeprefix("SLURM_JWT=")

    def wait_expired(self, token: str, timeout_s: float = 30) -> None:
        """Return once ``token``'s own ``exp`` claim lies in the past (by Slurm's clock, which is
        this machine's): a test waits on the condition, not on a guessed sleep."""
        claims = token.split(".")[1]
        exp = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["exp"]
        deadline = time.monotonic() + timeout_s
        while time.time() <= exp:
            assert time.monotonic() < deadline, f"token exp {exp} never passed"
            time.sleep(0.05)

    def held_s(self, job_id: int) -> int:
        """Seconds job ``job_id`` has held its allocation, by Slurm (``RunTime``)."""
        return runtime_s(self.show_job(job_id)["RunTime"])

    def wait_held(self, job_id: int, seconds: int, timeout_s: float = 60) -> None:
        """Return once Slurm says job ``job_id`` has run for at least ``seconds``."""
        deadline = time.monotonic() + timeout_s
        while self.held_s(job_id) < seconds:
            assert time.monotonic() < deadline, f"job {job_id} never ran {seconds} s"
            time.sleep(0.1)

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-n", self.host, "-o", "%t", check=False).strip()

    def set_node(self, state: str, reason: str = "attune test") -> None:
        extra = [f"reason={reason}"] if state.lower() in ("down", "drain") else []
        self.run("scontrol", "update", f"nodename={self.host}", f"state={state}", *extra)

    def show_job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job -o``: Slurm's own view, field by field."""
        line = self.run("scontrol", "show", "job", "-o", str(job_id)).strip()
        fields: dict[str, str] = {}
        for item in line.split():
            key, _, value = item.partition("=")
            fields.setdefault(key, value)
        return fields

    def jobs(self) -> list[dict[str, str]]:
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%k")
        rows = [line.split("|", 3) for line in out.splitlines() if line.strip()]
        return [dict(zip(("id", "name", "state", "comment"), r, strict=True)) for r in rows]

    # --- helpers ---

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.dir / "log" / f"{name}.out").open("ab")
        self.procs[name] = subprocess.Popen(
            argv,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def _terminate(self, *names: str) -> None:
        """SIGTERM the daemons together, SIGKILL any still there after 10 s."""
        procs = [p for n in names if (p := self.procs.pop(n, None)) and p.poll() is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _kill_strays(self) -> None:
        """Any process still holding this cluster's configuration (a job step whose node was
        lost) is killed: nothing outlives the cluster."""
        marker = f"SLURM_CONF={self.conf}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue

    def _restd_up(self) -> bool:
        headers = {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self.token}
        try:
            r = httpx.get(f"{self.url}/slurm/v0.0.38/ping", headers=headers, timeout=2)
        except httpx.TransportError:
            return False
        return r.status_code == 200

    def _until(self, ready: object, deadline: float, what: str = "the jobs to end") -> None:
        assert callable(ready)
        while not ready():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    log = (self.dir / "log" / f"{name}.out").read_text()[-800:]
                    raise RuntimeError(f"{name} exited ({proc.returncode}): {log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm: waited too long for {what}")
            time.sleep(0.1)


def main() -> int:
    try:
        ensure_packages()
    except ClusterUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    cluster = SlurmCluster().start()
    try:
        for key, value in cluster.settings().items():
            print(f"export {key}={value}")
        print("# Ctrl-C stops the cluster", file=sys.stderr)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def runtime_s(field: str) -> int:
    """``RunTime`` of ``scontrol show job``: ``[D-]HH:MM:SS``."""
    days, _, clock = field.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return (int(days or 0) * 24 + h) * 3600 + m * 60 + s
