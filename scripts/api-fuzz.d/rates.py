"""What the schemathesis runs of scripts/api-fuzz reached, from their reports.

From each run's event stream (NDJSON), per operation and phase: how many of the requests
generated as valid the server accepted (a 2xx or 3xx), and what turned the rest away
(missing: 404; conflict: 409; refused: any other 4xx). From the stateful run's verdict
(JSON): whether the phase ran, and how many test cases it made. Exits 1 when the stateful
phase did not run or made no case.

    python3 rates.py STATEFUL.json RUN.ndjson [RUN.ndjson …]
"""
import collections
import json
import sys

OUTCOMES = ("accepted", "missing", "conflict", "refused", "other")


def outcome(status):
    if 200 <= status < 400:
        return "accepted"
    return {404: "missing", 409: "conflict"}.get(status, "refused" if status < 500 else "other")


def positive_outcomes(paths):
    """(operation, phase) → Counter of outcomes, over every recorded case generated as valid."""
    rates = collections.defaultdict(collections.Counter)
    for path in paths:
        with open(path) as f:
            for line in f:
                event = json.loads(line).get("ScenarioFinished")
                if not event:
                    continue
                recorder = event["recorder"]
                for case_id, case in (recorder.get("cases") or {}).items():
                    meta = case["value"].get("meta") or {}
                    if meta.get("generation", {}).get("mode") != "positive":
                        continue
                    response = (recorder["interactions"].get(case_id) or {}).get("response")
                    if response:
                        rates[(recorder["label"], event["phase"])][outcome(response["status_code"])] += 1
    return rates


def print_rates(rates):
    print(f"{'operation (valid requests)':<42} {'phase':<9} {'accepted':>15}" +
          "".join(f" {o:>8}" for o in OUTCOMES[1:]))
    for (label, phase), counts in sorted(rates.items()):
        total = sum(counts.values())
        accepted = f"{counts['accepted']}/{total} {counts['accepted'] / total:4.0%}"
        print(f"{label:<42} {phase:<9} {accepted:>15}" + "".join(f" {counts[o]:>8}" for o in OUTCOMES[1:]))


def stateful_ran(path):
    with open(path) as f:
        report = json.load(f)
    phase = (report.get("phases") or {}).get("stateful", {})
    cases = report["test_cases"]
    print(f"stateful phase: {phase.get('status')}, {cases['generated']} test cases, "
          f"{cases['with_failures']} with failures")
    return phase.get("status") not in (None, "skip") and cases["generated"] > 0


def main(stateful, *streams):
    print_rates(positive_outcomes(streams))
    if not stateful_ran(stateful):
        print("api-fuzz: the stateful phase did not run", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
