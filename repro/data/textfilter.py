"""text8's filter, re-implemented from the rules of Matt Mahoney's ``wikifil.pl`` that apply to plain text.

text8 is the first 10^8 characters of enwik8 after ``wikifil.pl``: markup removed, then every line is
padded with spaces, upper-case ASCII letters are lowered, each digit is spelled out as a word
("0" -> " zero "), and every run of characters outside a-z becomes one space. The markup rules do not
apply to plain text, so only the last three steps are implemented. As in the Perl original, only ASCII
letters are lowered: accented and other non-ASCII letters become spaces.
"""

from __future__ import annotations

import re

_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_NOT_LETTERS = re.compile(rb"[^a-z]+")


def text8_filter(data: bytes) -> bytes:
    """UTF-8 (or any ASCII-compatible) bytes -> text8 symbols: a-z and single spaces.

    The result starts with a space and has no trailing space, like text8 itself.
    """
    data = data.lower()  # bytes.lower() lowers ASCII only, as Perl's tr/A-Z/a-z/
    for digit, word in enumerate(_DIGITS):
        data = data.replace(str(digit).encode(), b" " + word.encode() + b" ")
    return _NOT_LETTERS.sub(b" ", b" " + data + b" ").rstrip(b" ")
