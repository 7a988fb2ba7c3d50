"""The small real-text corpus the spine and fault tests train on (a `file` dataset)."""

from pathlib import Path

# A public-domain paragraph (the opening of the US Declaration of Independence), repeated with
# numbered section markers so the corpus is long enough for the 90/5/5 split.
TEXT = (
    "When in the Course of human events, it becomes necessary for one people to dissolve the political "
    "bands which have connected them with another, and to assume among the powers of the earth, the "
    "separate and equal station to which the Laws of Nature and of Nature's God entitle them, a decent "
    "respect to the opinions of mankind requires that they should declare the causes which impel them "
    "to the separation. "
)


def write_corpus(path: Path) -> Path:
    path.write_text("".join(f"Section {i}. {TEXT}" for i in range(120)))
    return path
