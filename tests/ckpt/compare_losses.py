"""compare_losses.py A B FIRST TOL STEPS: two runs' metrics.jsonl must both hold STEPS steps, and
their losses (steps >= FIRST) and validation losses must agree within TOL relative. Prints the
largest differences; exit 1 when above TOL. Shared by the data- and context-parallel tests."""
import json
import sys

a, b = [{r["step"]: r for r in map(json.loads, open(f))} for f in sys.argv[1:3]]
first, tol, total = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
if len(a) != total or len(b) != total:
    print(f"  expected {total} metric lines, got {len(a)} and {len(b)}")
    sys.exit(1)
steps = [s for s in sorted(a) if s >= first]
worst = max(abs(a[s]["loss"] - b[s]["loss"]) / abs(a[s]["loss"]) for s in steps)
vals = [(a[s]["val_loss"], b[s]["val_loss"]) for s in steps
        if "val_loss" in a[s] and "val_loss" in b[s]]
if not vals:
    print(f"  no validation loss in steps {first}..{total} of both runs")
    sys.exit(1)
vworst = max(abs(x - y) / abs(x) for x, y in vals)
print(f"  steps {first}..{total}: largest relative loss difference {worst:.2e}, "
      f"val loss {vworst:.2e}")
sys.exit(not (worst <= tol and vworst <= tol))
