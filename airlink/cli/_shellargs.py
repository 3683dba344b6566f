"""Splitting a shell's own options from the command it runs, Mahimahi style.

``airlink delay 20 airlink link down.trace -- sh -c '...'``: the outer shell's options end
at ``--`` or at the first word that is neither an option, an option's value nor one of the
shell's positional arguments; everything after is the command (which may itself be a shell).
"""
from __future__ import annotations

# Options of each shell that take a value (so their value is not mistaken for the command).
VALUE_OPTIONS = {
    "link": {"--uplink", "--user", "--downlink-queue", "--uplink-queue", "--downlink-queue-args",
             "--uplink-queue-args", "--downlink-log", "--uplink-log", "--tti-log",
             "--opportunity-bytes", "--downlink-tti-log", "--uplink-tti-log", "--stats",
             "--mode", "--idle-ms"},
    "delay": {"--trace", "--uplink", "--downlink", "--stats"},
    "loss": {"--gilbert", "--seed", "--stats"},
    "cell": {"--scheduler", "--preset", "--users", "--seed", "--tti", "--config", "--duration",
             "--queue", "--queue-args", "--set", "--uplink", "--mac-log", "--log-dir", "--warmup",
             "--late-after", "--stats", "--from-log", "--follow-rnti", "--log-direction", "--log-start"},
}
# How many positional arguments each shell takes before its command.
POSITIONALS = {"link": 1, "delay": 1, "loss": 2, "cell": 0}


def split_command(argv):
    """``(shell_argv, command)`` with command ``[]`` when none was given."""
    shell = argv[0]
    values = VALUE_OPTIONS.get(shell, set())
    want = POSITIONALS.get(shell, 0)
    i, seen = 1, 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], argv[i + 1:]
        if a in ("-h", "--help"):
            return argv, []
        if a.startswith("-") and len(a) > 1:
            # a delay that follows a trace, or bursty loss, takes one positional fewer
            if (shell, a.split("=")[0]) in (("delay", "--trace"), ("loss", "--gilbert")):
                want = POSITIONALS[shell] - 1
            if "=" not in a and a in values:
                i += 2
            else:
                i += 1
            continue
        if seen < want:
            seen += 1
            i += 1
            continue
        return argv[:i], argv[i:]
    return argv, []
