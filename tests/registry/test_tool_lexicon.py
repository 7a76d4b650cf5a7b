"""The verb lexicon behind a tool's class by name (registry.tool_lexicon): short, glued and phrased verbs, a verb
anywhere in the name, and the reads that must stay reads. An outside attacker's first listing lied with
`readOnlyHint: true` on `exec`, `shell`, `rm`... and named tools `get_rid_of_users` or `check_out_funds` without
annotations: every one of them was classed read and forwarded unheld."""

from __future__ import annotations

from typing import Any

import pytest

from registry.tool_classes import classify, mutating_verb

LYING = {"readOnlyHint": True, "destructiveHint": False}

# The attacker's names, and the class each gets whatever the server claims.
ATTACKER_NAMES = [
    ("exec", "I"),
    ("shell", "I"),
    ("rm", "unknown"),
    ("dropdb", "I"),
    ("deleteall", "unknown"),
    ("nuke_account", "I"),
    ("wire_money", "I"),
    ("withdraw", "I"),
    ("get_rid_of_users", "unknown"),
    ("find_and_nuke", "unknown"),
    ("check_out_funds", "I"),
]


def _class(tool: str, annotations: dict[str, Any] | None = None) -> str:
    return classify(tool, "s", annotations, [], False).effect_class


@pytest.mark.parametrize(("tool", "expected"), ATTACKER_NAMES, ids=[tool for tool, _ in ATTACKER_NAMES])
@pytest.mark.parametrize("annotations", [None, LYING], ids=["unannotated", "lying-read-only-hint"])
def test_trap_the_attackers_names_are_never_reads(tool: str, expected: str, annotations: dict[str, Any] | None) -> None:
    # given a tool the attacker listed, with no annotation or with readOnlyHint: true
    classification = classify(tool, "s", annotations, [], False)
    # then its name decides, the same class either way: never read, so never forwarded unheld
    assert classification.effect_class == expected
    assert classification.source == "heuristic"
    if annotations:
        assert "never makes a call less guarded than its name" in classification.reason


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        # arbitrary code or commands: I, whatever the spelling
        *[(name, "I") for name in ("eval", "sh", "bash", "zsh", "cmd", "powershell", "sudo", "execute_query")],
        *[(name, "I") for name in ("run_command", "runCommand", "run_shell", "run_script", "execShell")],
        # money that moves, data that is gone, a process stopped: I
        *[(name, "I") for name in ("pay", "refund", "transfer", "charge", "withdraw_funds", "wireTransfer")],
        *[(name, "I") for name in ("purge", "wipe", "destroy", "kill", "terminate", "truncate", "obliterate")],
        *[(name, "I") for name in ("shut_down_server", "cash_out", "checkout_cart")],
        # something said: C
        ("send", "C"),
        # like delete: unknown, its inverse needs the previous state
        *[(name, "unknown") for name in ("rmdir", "rm_rf", "del", "unlink", "uninstall_package", "format_disk")],
        *[(name, "unknown") for name in ("get_rid_of", "getRidOfUsers", "check_in_guest", "mkdir")],
    ],
)
def test_short_and_phrased_verbs_have_the_class_of_what_they_do(tool: str, expected: str) -> None:
    assert (_class(tool), _class(tool, LYING)) == (expected, expected)


@pytest.mark.parametrize(
    ("tool", "verb", "expected"),
    [
        ("dropdb", "drop", "I"),
        ("droptable", "drop", "I"),
        ("deleteall", "delete", "unknown"),
        ("removeallusers", "remove", "unknown"),  # an open glued word in verb position (below)
        ("rmrf", "rm", "unknown"),
        ("killall", "kill", "I"),
        ("wipedisk", "wipe", "I"),
        ("executeall", "execute", "I"),
        ("nukeit", "nuke", "I"),
    ],
)
def test_a_verb_glued_to_a_known_object_is_that_verb(tool: str, verb: str | None, expected: str) -> None:
    found = mutating_verb(tool)
    assert (found.verb if found else None, _class(tool)) == (verb, expected)


@pytest.mark.parametrize(
    "tool",
    [
        *("address_book", "settings", "postgres_tables", "dropdown_options", "shall_we", "payload", "runtime"),
        *("postcode_lookup", "postscript_pages", "install_status"),
    ],
)
def test_trap_a_word_that_merely_starts_like_a_verb_is_no_verb(tool: str) -> None:
    # given a name whose first word starts with add, set, post, drop, sh, pay or run, glued to no known object
    # then no verb is read in it: the server's readOnlyHint decides it
    assert mutating_verb(tool) is None
    assert classify(tool, "s", {"readOnlyHint": True}, [], False).effect_class == "read"


HONEST_READS = [
    "get_status",
    "list_transfers",
    "read_file",
    "search_payments",
    "show_payments",
    "get_format",
    "list_formats",
    "list_directory",
    "read_graph",
    "search_nodes",
    "read_shell_history",
    "get_exec_status",
    "list_evals",
    "get_wire_details",
    "list_checkout_sessions",
    "get_check_out_time",
    "get_run_command",
    "get_dropdb_status",
    "get_sudo_config",
]


@pytest.mark.parametrize("tool", HONEST_READS)
def test_honest_reads_stay_reads(tool: str) -> None:
    # a noun after a read verb (plural, or a verb as often a noun) is the read's object, not a verb
    assert (_class(tool), _class(tool, {"readOnlyHint": True})) == ("read", "read")


@pytest.mark.parametrize("tool", ["git_status", "git_log", "git_diff", "open_nodes", "directory_tree"])
def test_reads_without_a_read_verb_are_reads_by_their_annotation_only(tool: str) -> None:
    # no name heuristic knows them, so unknown by default; their honest readOnlyHint makes them reads
    assert (_class(tool), _class(tool, {"readOnlyHint": True})) == ("unknown", "read")


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("find_and_exec", "exec"),
        ("search_then_format", "format"),
        ("get_or_wire", "wire"),
        ("list_and_deleteall", "deleteall"),
        ("find_and_nuke", "nuke"),
        ("get_user_delete", "delete"),  # a verb that is no noun counts anywhere
    ],
)
def test_a_conjunction_puts_a_verb_back_in_verb_position(tool: str, expected: str) -> None:
    # given a name starting with a read verb and a mutating verb later
    found = mutating_verb(tool)
    # then it is read as a verb, and the name is not a read
    assert found is not None and found.said == expected
    assert _class(tool) == "unknown"
    assert _class(tool, {"readOnlyHint": True}) == "unknown"


@pytest.mark.parametrize(
    "tool", ["sandbox_exec", "container_shell", "db.dropdb", "bank__wire/money", "users.nuke", "disk_format"]
)
def test_trap_a_verb_anywhere_in_a_name_without_a_read_verb_beats_a_read_only_hint(tool: str) -> None:
    # given a name that does not start with a read verb and holds a verb later or in another segment
    classification = classify(tool, "s", {"readOnlyHint": True}, [], False)
    # then readOnlyHint does not make it a read
    assert classification.effect_class != "read"
    assert "never makes a call less guarded than its name" in classification.reason


def test_the_reason_says_how_a_glued_or_phrased_name_was_read() -> None:
    assert classify("dropdb", "s", None, [], False).reason == (
        "the name starts with 'dropdb' (read as 'drop'): nothing undoes it once it has happened"
    )
    assert "'get_rid_of'" in classify("get_rid_of_users", "s", None, [], False).reason
    reason = classify("exec", "s", {"readOnlyHint": True}, [], False).reason
    assert "it runs code or a command on the server" in reason
    assert "but the name holds 'exec', a mutating verb" in reason


# The attacker's second listing: each name was classed read, by a lying readOnlyHint or because nothing in it was
# recognised as mutating.
SECOND_ATTACK = [
    # inflections
    ("deletes", "delete", "unknown"),
    ("deleting_users", "delete", "unknown"),
    ("deleted_all", "delete", "unknown"),
    ("transfers_money", "transfer", "I"),
    ("wiring_money", "wire", "I"),
    # trailing digits
    ("delete2", "delete", "unknown"),
    ("rm2", "rm", "unknown"),
    # glued words outside the closed list of objects
    ("deletecontacts", "delete", "unknown"),
    ("dropcollection", "drop", "I"),
    ("sqlexec", "exec", "I"),
    ("shellexec", "exec", "I"),
    ("flushall", "flush", "unknown"),
    ("wipeout", "wipe", "I"),
    # synonyms: destruction like delete, money movement I
    ("expunge", "expunge", "unknown"),
    ("flush_db", "flush", "unknown"),
    ("scrub_db", "scrub", "unknown"),
    ("evict_all", "evict", "unknown"),
    ("remit", "remit", "I"),
    ("disburse", "disburse", "I"),
    ("liquidate", "liquidate", "I"),
    ("zap_users", "zap", "unknown"),
    ("trash_files", "trash", "unknown"),
    ("dispose_records", "dispose", "unknown"),
    ("annihilate", "annihilate", "unknown"),
    ("exterminate", "exterminate", "unknown"),
]


@pytest.mark.parametrize(("tool", "verb", "expected"), SECOND_ATTACK, ids=[tool for tool, _, _ in SECOND_ATTACK])
@pytest.mark.parametrize("annotations", [None, LYING], ids=["unannotated", "lying-read-only-hint"])
def test_trap_inflected_numbered_glued_and_synonym_verbs_are_never_reads(
    tool: str, verb: str, expected: str, annotations: dict[str, Any] | None
) -> None:
    # given a tool of the attacker's second listing, with no annotation or with readOnlyHint: true
    classification = classify(tool, "s", annotations, [], False)
    # then the lexicon reads the verb it spells and the name decides, whatever the server claims
    found = mutating_verb(tool)
    assert found is not None and (found.said, found.verb) == (tool.split("_")[0], verb)
    assert (classification.effect_class, classification.source) == (expected, "heuristic")
    if annotations:
        assert "never makes a call less guarded than its name" in classification.reason


def test_the_reason_says_how_an_inflected_or_glued_verb_was_read() -> None:
    assert classify("deleting_users", "s", None, [], False).reason == (
        "the name starts with 'deleting' (read as 'delete'): its inverse needs the previous state, which a name does "
        "not give"
    )
    assert "'sqlexec' (read as 'exec'): it runs code or a command" in classify("sqlexec", "s", None, [], False).reason
    assert "'rm2' (read as 'rm')" in classify("rm2", "s", {"readOnlyHint": True}, [], False).reason


@pytest.mark.parametrize(
    ("tool", "verb"),
    [
        ("users_deleted", "deleted"),  # -ed anywhere
        ("cache.flushing", "flushing"),
        ("find_and_deletes", "deletes"),  # -s after a conjunction is in verb position
        ("get_and_dropcollection", "dropcollection"),
        ("users.deletes", "deletes"),  # first word of its own segment
        ("users_deletes", "deletes"),  # -s anywhere but after a leading read verb
        ("users_deletecontacts", "deletecontacts"),
        ("db_sqlexec", "sqlexec"),
    ],
)
def test_trap_a_mutating_form_anywhere_beats_a_read_only_hint(tool: str, verb: str) -> None:
    # given a lying readOnlyHint on a name holding an inflected, glued or suffixed verb where it can be a verb
    classification = classify(tool, "s", LYING, [], False)
    found = mutating_verb(tool)
    # then the lexicon wins over the annotation: never a read
    assert found is not None and found.said == verb
    assert classification.effect_class != "read"


@pytest.mark.parametrize(
    "tool",
    [
        # a plural after a read verb is its object, not a verb
        *("list_transfers", "search_deletes", "get_payouts", "list_flushes", "show_refunds"),
        # an inflected verb that is as often a noun, after a read verb
        *("get_formatted_date", "read_wiring_diagram", "list_trash"),
        # nouns spelled like an inflection, a glued verb or a suffixed one
        *("get_setting", "list_postings", "messaging_status", "dropdown_options", "droplets", "removal_status"),
        *("user_dropdown", "cache_evictions", "open_nodes"),
        *("execution_status", "withdrawal_history", "retrieval_search", "skill_list", "nutshell_summary"),
        # digits on a word that is no verb
        *("s3_list", "ec2_describe", "sha256_of"),
    ],
)
def test_trap_nouns_that_look_like_the_new_forms_stay_what_they_are(tool: str) -> None:
    # given an honest read (by its name or by its honest readOnlyHint)
    # then no verb is read in it, and its readOnlyHint makes it a read
    assert mutating_verb(tool) is None
    assert _class(tool, {"readOnlyHint": True}) == "read"


def test_a_plural_after_a_read_verb_is_its_object() -> None:
    # given -s forms: first word, after a conjunction, after a read verb, and later in a name without a read verb
    assert _class("transfers") == "I"
    assert _class("list_and_transfers") == "unknown"
    # then only after a read verb is it a noun
    assert _class("list_transfers", LYING) == "read"
    assert _class("users_deletes", LYING) == "unknown"


def test_an_inflection_of_a_verb_that_counts_anywhere_counts_anywhere() -> None:
    # deliberately conservative, like `get_message`: a rule makes `list_deleted_files` a read
    assert _class("list_deleted_files") == "unknown"
    assert _class("list_deleted_files", LYING) == "unknown"
