"""The verb lexicon behind a tool's class by name (registry.tool_classes): which words of a tool name are verbs that
change the world, and which class each gives.

A name is split into words (registry.tool_classes.name_words: `_`, `-`, whitespace and camelCase), then read as
tokens:

    phrases      a few verbs spelled in several words are one token: `get_rid_of_users` is "get_rid_of" + users,
                 `check_out_funds` "checkout" + funds, `run_command` "run_command"
    verbs        a token in the table below is a verb, and so is a token that is one with trailing digits dropped
                 (`delete2`, `rm2`)
    inflected    a verb's -ing or -ed form (`deleting_users`, `deleted_all`, `wiring_money`, `dropped`) is that
                 verb wherever the verb would count; its -s or -es form (`deletes`, `transfers_money`, `flushes`)
                 is that verb too, but after a leading read verb it is a plural noun, its object (`list_transfers`,
                 `search_payments`), unless a conjunction comes first. A few -ing nouns are no verb (`get_setting`,
                 `posting`)
    glued        a lowercase word glued from a verb and a word from a short list of objects is that verb: `dropdb`
                 (drop), `deleteall` (delete), `rmrf` (rm), `killall`, `flushall`; the list is closed so `address`,
                 `settings`, `postgres` are never read as add, set or post. A word that starts with a destroying,
                 money-moving or exec verb of four letters or more (_OPEN_GLUE_VERBS: delete, drop, wipe, flush,
                 purge, remove, destroy, transfer...) and goes on with any letters is that verb too
                 (`deletecontacts`, `dropcollection`, `wipeout`), unless it is an English word (_NOT_GLUED:
                 `dropdown`, `droplet`, `removal`, `execution`...). A word that ends with exec, execute, eval, shell
                 or kill after two letters or more runs something (`sqlexec`, `shellexec`, `pyeval`), unless it is
                 an English word (`retrieval`, `nutshell`, `overkill`)

Where a verb counts. Most verbs count anywhere in the name, so a read verb first does not make a read when one
follows (`get_or_create_user`, `find_and_nuke`). Some verbs are just as often nouns (`format`, `shell`, `exec`,
`eval`, `wire`, `checkout`, `rm`, `trash`, every glued word, every -s form, and the inflections of these): after a
leading read verb they are its object (`get_format`, `read_shell_history`, `list_checkout_sessions`,
`get_formatted_date` stay reads) unless a conjunction (`and`, `then`, `or`) puts them back in verb position
(`find_and_exec`); anywhere else, including the first word, they count (`users_deletes`, `db_sqlexec`: a
`readOnlyHint` on them makes no read). An inflection of a verb that counts anywhere counts anywhere too
(`list_deleted_files` is not a read: like `get_message`, a one-line rule says otherwise).

The classes follow one logic: money that moved and data that is gone give I; something said to someone gives C;
code or a shell run on the server gives I (its effects are whatever it ran: nothing bounds or undoes them); a
change whose inverse needs the previous state gives unknown (so `delete`, `rm`, `deleteall` are unknown, like
`update`); a create is unknown too (only a declared inverse makes R). Synonyms take the class of the word they
stand for: `remit`, `disburse`, `liquidate` move money (I); `expunge`, `annihilate`, `exterminate`, `zap`,
`trash`, `dispose`, `evict`, `scrub`, `flush` destroy like `delete` (unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# A tool's class (registry.tool_classes, which names it too): defined here, below it, so the two never import
# each other.
EffectClass = Literal["read", "R", "C", "I", "unknown"]

READ_VERBS = frozenset(
    ("list", "get", "read", "search", "find", "fetch", "query", "describe", "show", "count", "check", "view")
)
# Class, why, words. A phrase appears here as its token (get_rid_of), see _PHRASES.
VERB_TABLE: tuple[tuple[EffectClass, str, tuple[str, ...]], ...] = (
    (
        "unknown",
        "a create could be undone by deleting what its answer names, but no pack declares that inverse, and only a "
        "declared inverse makes a call R",
        ("create", "mkdir"),
    ),
    (
        "C",
        "it cannot be unsent, only corrected afterwards",
        ("send", "post", "publish", "notify", "message", "reply", "comment"),
    ),
    (
        "I",
        "nothing undoes it once it has happened",
        (
            *("transfer", "pay", "charge", "wire", "withdraw", "refund", "checkout", "cashout", "payout"),
            *("remit", "disburse", "liquidate"),
            *("drop", "wipe", "purge", "destroy", "nuke", "obliterate", "shred", "erase", "truncate"),
            *("cancel", "kill", "terminate", "shutdown"),
        ),
    ),
    (
        "I",
        "it runs code or a command on the server, whose effects nothing bounds and nothing undoes",
        (
            *("execute", "exec", "eval", "shell", "sh", "bash", "zsh", "cmd", "powershell", "sudo"),
            *("run_command", "run_shell", "run_script", "run_code", "run_cmd", "run_bash"),
        ),
    ),
    (
        "unknown",
        "its inverse needs the previous state, which a name does not give",
        (
            *("update", "delete", "del", "remove", "rm", "rmdir", "unlink", "uninstall", "get_rid_of", "format"),
            *("set", "patch", "put", "run", "add", "insert", "write", "reset", "revoke", "grant", "deploy"),
            *("restart", "submit", "approve", "reject", "archive", "move", "replace", "rename", "edit", "modify"),
            *("upsert", "merge", "assign", "upload", "import", "save", "apply", "push", "restore", "clear"),
            *("enable", "disable", "invite", "schedule", "trigger", "checkin", "chmod", "chown"),
            *("expunge", "annihilate", "exterminate", "zap", "trash", "dispose", "evict", "scrub", "flush"),
        ),
    ),
)
VERB_CLASSES: dict[str, tuple[EffectClass, str]] = {
    verb: (effect_class, why) for effect_class, why, verbs in VERB_TABLE for verb in verbs
}
# Words after which a verb is in verb position again: `find_and_exec`, `list_then_delete`, `get_or_create`.
_CONJUNCTIONS = frozenset(("and", "then", "or"))
# Verbs in several words, read as one token (the longest first). Only get_rid_of counts anywhere; the others are as
# often nouns (`get_check_out_time`, `get_run_command`), see _NOUN_LIKE.
_PHRASES: dict[tuple[str, ...], str] = {
    ("get", "rid", "of"): "get_rid_of",
    ("check", "out"): "checkout",
    ("check", "in"): "checkin",
    ("cash", "out"): "cashout",
    ("pay", "out"): "payout",
    ("shut", "down"): "shutdown",
    **{("run", what): f"run_{what}" for what in ("command", "shell", "script", "code", "cmd", "bash")},
}
_LONGEST_PHRASE = max(len(words) for words in _PHRASES)
# Verbs as often nouns or abbreviations: after a leading read verb only a conjunction makes them verbs.
_NOUN_LIKE = frozenset(
    (
        *("exec", "eval", "shell", "sh", "bash", "zsh", "cmd", "powershell", "sudo", "wire", "format", "rm"),
        *("del", "checkout", "checkin", "cashout", "payout", "shutdown", "trash"),
        *(f"run_{what}" for what in ("command", "shell", "script", "code", "cmd", "bash")),
    )
)
# What a glued verb may be glued to. Closed on purpose: an open suffix would read `address` as add + ress. Not
# "code" or "script": `postcode` and `postscript` are nouns.
_GLUED_OBJECTS = frozenset(
    (
        *("all", "everything", "it", "db", "database", "databases", "table", "tables", "schema", "index", "rows"),
        *("records", "data", "user", "users", "account", "accounts", "file", "files", "dir", "folder", "disk"),
        *("drive", "cache", "repo", "bucket", "money", "funds", "cash", "rf", "fr", "sql", "command", "cmd"),
    )
)
# Verbs that may start a glued word: single words of three letters or more (a shorter one would match too much:
# sh + all is `shall`), and rm, the shell's own; longest first, so a word is read as the longest verb it starts with.
_GLUE_VERBS = sorted(
    [verb for verb in VERB_CLASSES if verb.isalpha() and len(verb) >= 3] + ["rm"], key=len, reverse=True
)
# Verbs that start a glued word whatever follows, in verb position: what destroys, moves money or runs code, four
# letters or more. Longest first.
_OPEN_GLUE_VERBS = sorted(
    (
        *("delete", "remove", "destroy", "drop", "wipe", "flush", "purge", "erase", "shred", "nuke", "truncate"),
        *("obliterate", "annihilate", "exterminate", "expunge", "dispose", "evict", "scrub", "trash", "kill"),
        *("terminate", "transfer", "withdraw", "refund", "remit", "disburse", "liquidate", "exec", "execute"),
    ),
    key=len,
    reverse=True,
)
# English words that start with one of them and are no verb of it.
_NOT_GLUED = frozenset(
    (
        *("dropdown", "dropdowns", "droplet", "droplets", "dropbox", "dropzone", "dropper", "dropout", "dropouts"),
        *("removal", "removals", "remover", "destroyer", "killer", "killers", "erasure", "eviction", "evictions"),
        *("disposal", "disposable", "scrubber", "shredder", "trashcan", "trashbin", "transferable", "transferee"),
        *("withdrawal", "withdrawals", "refundable", "remittance", "remittances", "execution", "executions"),
        *("executive", "executives", "executor", "executors", "executable", "executables", "flushable"),
    )
)
# Verbs that end a glued word after two letters or more (`sqlexec`), longest first, and the English words that end
# so and run nothing.
_SUFFIX_VERBS = ("execute", "shell", "exec", "eval", "kill")
_NOT_SUFFIXED = frozenset(
    (
        *("retrieval", "medieval", "upheaval", "primeval", "coeval", "seashell", "eggshell", "nutshell"),
        *("bombshell", "overkill", "roadkill", "skill", "reskill", "upskill"),
    )
)
# Inflected forms that are usually nouns: no verb.
_NOT_INFLECTED = frozenset(("setting", "posting", "postings", "messaging"))


@dataclass(frozen=True)
class Verb:
    """A mutating verb found in a name: `said` as the name spells it (`dropdb`, `get_rid_of`), `verb` the table's
    word that gives its class (`drop`), `at` its token's place in the segment (0: the name starts with it)."""

    said: str
    verb: str
    at: int

    @property
    def spelled(self) -> str:
        """How a reason names it: 'drop' or 'dropdb' (read as 'drop')."""
        return repr(self.said) if self.said == self.verb else f"{self.said!r} (read as {self.verb!r})"


def segment_verbs(words: Sequence[str]) -> list[Verb]:
    """The mutating verbs of one name segment's words (lowercase, in order), each only where it can be a verb."""
    tokens = _tokens(words)
    read_first = bool(tokens) and tokens[0] in READ_VERBS
    found = []
    for at, token in enumerate(tokens):
        reading = _as_verb(token)
        if reading is None:
            continue
        verb, anywhere = reading
        if anywhere or not read_first or tokens[at - 1] in _CONJUNCTIONS:
            found.append(Verb(token, verb, at))
    return found


def _tokens(words: Sequence[str]) -> list[str]:
    """`words` with each phrase of _PHRASES made one token."""
    tokens: list[str] = []
    index = 0
    while index < len(words):
        for width in range(min(_LONGEST_PHRASE, len(words) - index), 1, -1):
            phrase = _PHRASES.get(tuple(words[index : index + width]))
            if phrase is not None:
                tokens.append(phrase)
                index += width
                break
        else:
            tokens.append(words[index])
            index += 1
    return tokens


def _as_verb(token: str) -> tuple[str, bool] | None:
    """The table's verb `token` is (spelled out, with trailing digits, inflected or glued), and whether it counts
    even after a leading read verb (else only after a conjunction there); None when it is no verb."""
    word = token.rstrip("0123456789") or token
    if word in VERB_CLASSES:
        return word, word not in _NOUN_LIKE
    if not word.isalpha():
        return None
    for verb in _GLUE_VERBS:
        if word.startswith(verb) and word[len(verb) :] in _GLUED_OBJECTS:
            return verb, False
    base = _inflected(word, ("ing", "ed"))
    if base is not None:
        return base, base not in _NOUN_LIKE
    base = _inflected(word, ("s",))
    if base is not None:
        return base, False
    if word not in _NOT_GLUED:
        for verb in _OPEN_GLUE_VERBS:
            if word.startswith(verb) and len(word) > len(verb):
                return verb, False
    if word not in _NOT_SUFFIXED:
        for verb in _SUFFIX_VERBS:
            if word.endswith(verb) and len(word) >= len(verb) + 2:
                return verb, False
    return None


def _inflected(word: str, endings: tuple[str, ...]) -> str | None:
    """The table's verb (three letters or more) of which `word` is the -ing, -ed or -s form: deleting, wiring,
    dropping, deleted, flushed, dropped, notified, deletes, flushes, notifies."""
    if word in _NOT_INFLECTED:
        return None
    for ending in endings:
        if not word.endswith(ending) or len(word) <= len(ending) + 2:
            continue
        stem = word[: -len(ending)]
        candidates = [stem, stem + "e", stem[:-1] + "y" if stem.endswith("i") else ""]
        if ending == "s" and stem.endswith("e"):
            candidates.append(stem[:-1])  # flushes, pushes
        if ending == "s" and stem.endswith("ie"):
            candidates.append(stem[:-2] + "y")  # notifies
        if len(stem) > 3 and stem[-1] == stem[-2]:
            candidates.append(stem[:-1])  # dropping, transferred
        for base in candidates:
            if len(base) >= 3 and base in VERB_CLASSES and base.isalpha():
                return base
    return None
