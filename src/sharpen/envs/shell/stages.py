"""The stages of a shell episode — inspect, change, verify — read from a command's verbs.

The shell environment has one tool for everything (``run``), so the stage of a ``run`` is
decided by the command it runs (:func:`command_stage`), by this rule:

1. The command is cut into simple commands at ``|``, ``&&``, ``||``, ``;`` and newlines; a
   simple command's verb is its first word after any ``NAME=value`` assignments, prefixes
   (``sudo``, ``env``, ``xargs``, ``time``, …) and shell keywords (``while``, ``do``, ``done``,
   …); ``find … -exec VERB`` adds VERB.
2. It is a **change** when it redirects output into a file (``>``, ``>>``; not into
   ``/dev/null`` or another descriptor such as ``2>&1``), when a verb writes
   (:data:`STAGES` maps it to ``change``: ``mkdir``, ``cp``, ``mv``, ``rm``, ``chmod``,
   ``tee``, …), when ``sed``/``perl`` edit in place (``-i``), ``sort`` writes with ``-o``,
   ``find`` deletes (``-delete``), or when a verb is unknown (it may do anything).
3. Otherwise it is a **verify** when a verb checks a result (``diff``, ``cmp``, ``test``,
   ``[``, a checksum) or runs a script (``bash x.sh``, ``sh``, ``./x``).
4. Otherwise — only reading verbs (``ls``, ``cat``, ``grep``, ``wc``, ``head``, …) — it is an
   **inspect**.

``done`` (which runs the hidden checks) is a verify. The rule reads words, not a shell's
grammar: quoting is respected (:mod:`shlex`), but a ``>`` inside ``$( )`` or an alias is read
as written.
"""

from __future__ import annotations

import re
import shlex

_INSPECT = ("ls", "cat", "head", "tail", "grep", "egrep", "fgrep", "wc", "find", "file", "stat",
            "pwd", "tree", "du", "less", "more", "sort", "uniq", "cut", "awk", "sed", "tr",
            "echo", "printf", "nl", "column", "basename", "dirname", "realpath", "which", "type",
            "od", "xxd", "hexdump", "paste", "comm", "join", "rev", "tac", "true", "cd", "date",
            "seq", "expr", "jq", "read", "export", "set", "unset", "local", "shift", "exit",
            "return", "break", "continue", ":")
_CHANGE = ("mkdir", "cp", "mv", "rm", "rmdir", "touch", "chmod", "chown", "ln", "tee", "split",
           "csplit", "truncate", "install", "patch", "tar", "gzip", "gunzip", "unzip", "zip",
           "dd", "rename", "python", "python3", "perl")
_VERIFY = ("diff", "cmp", "test", "[", "[[", "md5sum", "sha1sum", "sha256sum", "cksum", "bash",
           "sh")

STAGES: dict[str, str] = {**dict.fromkeys(_INSPECT, "inspect"),
                          **dict.fromkeys(_CHANGE, "change"),
                          **dict.fromkeys(_VERIFY, "verify"), "done": "verify"}
"""Verb -> stage (the environment's ``stages``), in stage order: inspect, change, verify.
``done`` is the tool ``done``; every other key is a command's verb."""

_SKIP = {"sudo", "env", "xargs", "time", "command", "nohup", "then", "do", "else", "if",
         "elif", "while", "until", "for", "!", "{", "}", "(", ")", "fi", "done", "esac"}
"""Words skipped before a verb: prefixes and the shell's own keywords."""
_SEPARATORS = {"|", "||", "&&", ";", "&", ";;", "|&"}
_WRITES = {">", ">>", ">|", "&>", "&>>"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _tokens(line: str) -> list[str]:
    """``line`` as words and operators (``>``, ``|``, ``&&``, …), quotes respected."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: read it word by word
        return line.split()


def _simple_commands(command: str) -> tuple[list[list[str]], bool]:
    """The simple commands of ``command`` (their words, redirections removed) and whether
    any output goes into a file (not ``/dev/null``, not a descriptor: ``2>&1``)."""
    parts: list[list[str]] = [[]]
    writes = False
    for line in command.splitlines():
        tokens = _tokens(line)
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok in _SEPARATORS:
                parts.append([])
            elif tok in _WRITES or tok in ("<", "<<", "<<<", ">&", "<&"):
                target = tokens[i + 1] if i + 1 < len(tokens) else ""
                writes = writes or (tok in _WRITES and target not in ("", "/dev/null"))
                i += 1
            else:
                parts[-1].append(tok)
            i += 1
        parts.append([])
    return [p for p in parts if p], writes


def _verbs(words: list[str]) -> list[tuple[str, list[str]]]:
    """Each verb of one simple command with its arguments (``find -exec VERB`` adds one)."""
    if words[0] in ("for", "select", "case"):  # ``for NAME in WORDS``: no verb
        return []
    words = list(words)
    while words and (words[0] in _SKIP or _ASSIGNMENT.match(words[0])):
        words = words[1:]
    if not words:
        return []
    verb, args = words[0], words[1:]
    out = [(verb, args)]
    if verb.rsplit("/", 1)[-1] == "find" and "-exec" in args:
        out.extend(_verbs(args[args.index("-exec") + 1:]))
    return out


def _runs_script(verb: str) -> bool:
    """``./x`` or ``/path/x`` where ``x`` is no known verb: a script of the task's."""
    return verb.startswith("./") or (verb.startswith("/")
                                     and verb.rsplit("/", 1)[-1] not in STAGES)


def _changes(verb: str, args: list[str]) -> bool:
    name = verb.rsplit("/", 1)[-1]
    if name in ("sed", "perl") and any(a.startswith("-i") for a in args):
        return True
    if name == "sort" and any(a.startswith("-o") for a in args):
        return True
    if name == "find" and "-delete" in args:
        return True
    stage = STAGES.get(name)
    if stage is None:
        return not _runs_script(verb)  # an unknown verb may do anything
    return stage == "change"


def command_stage(command: str) -> str:
    """``inspect``, ``change`` or ``verify`` for one ``run`` command (the module doc's rule)."""
    parts, writes = _simple_commands(command)
    verbs = [v for words in parts for v in _verbs(words)]
    if writes or any(_changes(verb, args) for verb, args in verbs):
        return "change"
    if any(STAGES.get(v.rsplit("/", 1)[-1]) == "verify" or _runs_script(v) for v, _ in verbs):
        return "verify"
    return "inspect"
