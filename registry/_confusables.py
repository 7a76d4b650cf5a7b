"""Letters that look like others, for the description scan (registry.tool_poisoning): Cyrillic and Greek letters
folded to the Latin ones they are drawn like, words mixing the scripts, and the obfuscated spellings of the scan's
main marker (`1gn0re prev10us`, `Ig-nore`, `i g n o r e`).

The table is the common look-alikes only (Unicode's confusables.txt has thousands; these are the ones a keyboard or
a font makes indistinguishable from Latin in a description): enough that "Ignore all previous instructions" written
with a Cyrillic i (U+0456) reads as what a model reads.
"""

from __future__ import annotations

import re

# Latin letter <- the Cyrillic and Greek letters drawn like it, as code points, so this file shows no look-alike of
# its own.
_LOOK_ALIKES = {
    chr(code): latin
    for latin, codes in (
        ("a", (0x0430, 0x03B1)),
        ("A", (0x0410, 0x0391)),
        ("B", (0x0412, 0x0392)),
        ("c", (0x0441, 0x03F2)),
        ("C", (0x0421,)),
        ("d", (0x0501,)),
        ("e", (0x0435,)),
        ("E", (0x0415, 0x0395)),
        ("G", (0x050C,)),
        ("h", (0x04BB,)),
        ("H", (0x041D, 0x0397)),
        ("i", (0x0456, 0x03B9)),
        ("I", (0x0406, 0x0399)),
        ("j", (0x0458, 0x03F3)),
        ("J", (0x0408,)),
        ("k", (0x03BA,)),
        ("K", (0x041A, 0x039A)),
        ("l", (0x04CF,)),
        ("M", (0x041C, 0x039C)),
        ("N", (0x039D,)),
        ("o", (0x043E, 0x03BF)),
        ("O", (0x041E, 0x039F)),
        ("p", (0x0440, 0x03C1)),
        ("P", (0x0420, 0x03A1)),
        ("q", (0x051B,)),
        ("s", (0x0455,)),
        ("S", (0x0405,)),
        ("t", (0x03C4,)),
        ("T", (0x0422, 0x03A4)),
        ("u", (0x03C5,)),
        ("v", (0x03BD,)),
        ("w", (0x051D,)),
        ("x", (0x0445, 0x03C7)),
        ("X", (0x0425, 0x03A7)),
        ("y", (0x0443,)),
        ("Y", (0x0423, 0x03A5)),
        ("Z", (0x0396,)),
    )
    for code in codes
}
_FOLD = str.maketrans(_LOOK_ALIKES)
_WORD = re.compile(r"\w+")
_LATIN = re.compile(r"[A-Za-z]")
# Digits and signs written for letters, read as the letters of the marker they spell.
_LEET = str.maketrans("013457@$", "oieastas")
_NOT_LETTERS = re.compile(r"[^a-z]+")
# The ignore-instructions marker on the letters alone: no word gap to keep, so `i g n o r e`, `Ig-nore` and
# `1gn0re_prev10us` read like the plain words. Fillers are the words an attack puts between.
_OBFUSCATED_IGNORE = re.compile(
    r"(?<!not)(?<!dont)(?<!cant)(?<!wont)(?<!never)(?:ignore|disregard|forget|override|bypass)"
    r"(?:all|any|the|your|my|of|previous|prior|above|earlier|preceding|former|these|those|system|every)*"
    r"(?:instructions?|prompts?|directions|directives|guidelines|guardrails)"
)


def fold(text: str) -> str:
    """`text` with each Cyrillic or Greek look-alike letter replaced by the Latin one it is drawn like."""
    return text.translate(_FOLD)


def mixed_script_words(text: str) -> list[str]:
    """The words of `text` that hold Latin letters and a Cyrillic or Greek look-alike: one word in two scripts is
    how a homoglyph hides a word from a scan. A word wholly Greek or Cyrillic, or a Greek unit (`μs`, `kΩ`), is not
    one: only look-alikes count."""
    if text.isascii():
        return []
    return [
        word
        for word in _WORD.findall(text)
        if _LATIN.search(word) and any(char in _LOOK_ALIKES for char in word) and not word.isascii()
    ]


def obfuscated_ignore(text: str) -> str:
    """The ignore-instructions marker spelled to slip past the plain patterns (digits for letters, separators or
    spaces inside the words), as its letters read: '' when there is none. `text` is already folded."""
    letters = _NOT_LETTERS.sub("", text.lower().translate(_LEET))
    match = _OBFUSCATED_IGNORE.search(letters)
    return match.group(0) if match else ""
