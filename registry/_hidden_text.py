"""Text a person reviewing a tool's definition cannot see or read, for the description scan
(registry.tool_poisoning): invisible characters (format characters, variation selectors, tag characters, Hangul
fillers) and control characters a terminal acts on, told from the joiners, direction marks and variation selectors
that scripts and emoji are written with; and base64 payloads.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

from registry._confusables import fold

_TAGS = range(0xE0000, 0xE0080)
# Invisible characters outside category Cf: variation selectors (the supplement carries smuggled bytes) and the
# Hangul fillers, letters that render as nothing.
_INVISIBLE_EXTRA = frozenset((0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)))
# Joiners and direction marks that scripts need, and the variation selectors emoji need (see _writing).
_SCRIPT_JOINERS = frozenset("\u200c\u200d\u200e\u200f")
_EMOJI_VARIATIONS = frozenset(map(chr, range(0xFE00, 0xFE10)))
# Control characters (C0 but tab and line feed, DEL, C1): a terminal acts on them (ESC starts an ANSI sequence
# that can hide the text after it, CR and backspace write over what came before). CR before LF ends a line.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
_CONTROL_NAMES = {
    0x00: "NULL",
    0x07: "BELL",
    0x08: "BACKSPACE",
    0x0D: "CARRIAGE RETURN",
    0x1B: "ESCAPE",
    0x7F: "DELETE",
}
_SPACES = re.compile(r"\s+")
# 40 characters or more of base64, not part of a word, a path or a URL; told from an identifier or a hash by holding
# upper and lower case letters and digits.
_BASE64 = re.compile(r"(?<![\w+/=.\-])[A-Za-z0-9+/]{40,}={0,2}(?![\w+/=.\-])")
_BASE64_KINDS = (re.compile(r"[A-Z]"), re.compile(r"[a-z]"), re.compile(r"\d"))


def hidden_characters(text: str) -> tuple[dict[str, int], str]:
    """The invisible and control characters of `text`, each named with how often it occurs, and the ASCII that tag
    characters spell (one entry for them all)."""
    counts: dict[str, int] = {}
    if text.isascii() and not _CONTROLS.search(text):  # the common case
        return counts, ""
    tags = []
    for index, char in enumerate(text):
        if ord(char) in _TAGS:
            tags.append(chr(ord(char) - _TAGS.start))
            continue
        if _CONTROLS.match(text, index):
            name = f"U+{ord(char):04X} {_CONTROL_NAMES.get(ord(char), 'control character')}"
        elif ord(char) > 127 and _invisible(char) and not _writing(text, index):
            name = _named(char)
        else:
            continue
        counts[name] = counts.get(name, 0) + 1
    return counts, "".join(tags)


def _named(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}{' ' + name if name else ''}"


def _writing(text: str, index: int) -> bool:
    """Whether the joiner, direction mark or variation selector at `index` is part of how a script is written:
    Persian needs U+200C between letters, emoji sequences U+200D, right-to-left text U+200E/U+200F, an emoji U+FE0F
    after it. Such a character next to a visible non-ASCII one is writing; next to ASCII, or in a run of invisible
    ones, it hides something."""
    before, after = text[max(index - 1, 0) : index], text[index + 1 : index + 2]
    if text[index] in _EMOJI_VARIATIONS:
        # One selector after an emoji (or a keycap's digit, `1️⃣`), never a run of them: a run carries bytes.
        if before in _EMOJI_VARIATIONS or after in _EMOJI_VARIATIONS or not before:
            return False
        return (ord(before) > 127 and not _invisible(before)) or (before in "0123456789#*" and after == "\u20e3")
    if text[index] not in _SCRIPT_JOINERS:
        return False
    return any(ord(near) > 127 and not _invisible(near) for near in before + after)


def _invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf" or ord(char) in _INVISIBLE_EXTRA


def visible(text: str) -> str:
    """`text` as the patterns read it: invisible and control characters dropped, NFKC-normalised, look-alike
    letters folded to Latin, whitespace collapsed."""
    text = _CONTROLS.sub("", text)
    if not text.isascii():
        text = fold(unicodedata.normalize("NFKC", "".join(char for char in text if not _invisible(char))))
    return _SPACES.sub(" ", text)


def encoded_payload(text: str) -> tuple[str, str] | None:
    """The first base64 blob of `text`, and the text it decodes to ('' when that is no printable text)."""
    for match in _BASE64.finditer(text):
        blob = match.group(0)
        if "//" in blob or not all(kind.search(blob) for kind in _BASE64_KINDS):
            continue
        try:
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4)).decode()
        except (binascii.Error, ValueError):
            decoded = ""
        return blob, decoded if decoded.isprintable() else ""
    return None
