"""What `run` and `replay` print when a campaign ends: one summary line for the terminal
from the campaign's summary.json record, and the lines that name what went wrong."""

from __future__ import annotations

from typing import Any

from xla_sentinel.core.model import ProgramStatus

# Statuses of a replayed module that never reached the targets (issue 17: a folder whose
# module could not be read was counted as replayed).
NOT_REPLAYED = frozenset({ProgramStatus.TRACE_ERROR, ProgramStatus.HARNESS_ERROR,
                          ProgramStatus.PLUGIN_ERROR})


def run_line(summary: dict[str, Any], summary_at: str) -> str:
    return (f"{summary['programs']} programs, {summary['executions']} executions in "
            f"{summary['elapsed_s']:.0f} s; findings: {summary['findings'] or 'none'} "
            f"({summary['findings_new']} new, {summary['findings_known']} known); "
            f"{len(summary['signatures'])} signatures; summary: {summary_at}")


def upload_owed(summary: dict[str, Any]) -> str:
    """The campaign ran and its findings are safe in staging; only the upload is owed."""
    state = summary["storage"]
    return (f"storage: {state['error'] or 'did not answer in time'}; {state['pending_objects']} "
            f"objects ({state['pending_findings']} findings) kept in {state['staging']}: run the "
            f"same command again to upload them")


def skipped_traces(summary: dict[str, Any]) -> list[str]:
    """One line per trace a replay could not read, naming the file."""
    lines = []
    for err in summary["trace_errors"]:
        # Loader messages name the file; a worker that died loading it does not.
        message = err.get("error") or "unreadable"
        where = "" if message.startswith(err["program"]) else f"{err['program']}: "
        lines.append(f"skipped {where}{message}")
    return lines


def replayed(summary: dict[str, Any]) -> int:
    """How many modules reached the targets."""
    return sum(n for s, n in summary["program_status"].items() if s not in NOT_REPLAYED)


def replay_line(summary: dict[str, Any], summary_at: str) -> str:
    done = replayed(summary)
    not_done = summary["programs"] - done
    return (f"{done} modules replayed" + (f", {not_done} not (see above)" if not_done else "")
            + f"; findings: {summary['findings'] or 'none'}; summary: {summary_at}")


def nothing_replayed(summary: dict[str, Any], summary_at: str) -> str:
    return (f"none of the {summary['programs']} modules could be replayed "
            f"(statuses: {summary['program_status']}); summary: {summary_at}")
