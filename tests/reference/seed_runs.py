"""What the reference CLI tests share: running a zaya command, and checking seed after seed."""

import subprocess
import sys


def run(cmd, timeout=600):
    """stdout of `cmd`; raises with the end of its stderr when it fails."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}:\n"
                           f"{proc.stderr.decode('utf-8', 'replace')[-2000:]}")
    return proc.stdout.decode("utf-8")


def check_seeds(name, seeds, check):
    """check(seed) -> (summary line, failures); prints each, then exits non-zero if any failed."""
    failed = 0
    for seed in seeds:
        try:
            line, fails = check(seed)
        except Exception as e:  # noqa: BLE001 - report and keep counting
            line, fails = f"seed {seed}: FAIL (error)", [f"{type(e).__name__}: {e}"]
        print(line, flush=True)
        for f in fails:
            print(f"  seed {seed}: {f}", flush=True)
        failed += bool(fails)
    print(f"{name}: {len(seeds) - failed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)
