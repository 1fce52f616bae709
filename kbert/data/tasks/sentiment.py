"""The movie-review sentiment snippets of Hutto & Gilbert (ICWSM 2014)."""

import io
import pathlib
import tarfile

from kbert.data.tasks.common import DataError, TaskData, check_text, fail, parse_label, split_of


MOVIE_REVIEWS_MEMBER = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
MOVIE_REVIEWS_FILES = ("hutto_ICWSM_2014.tar.gz", "movieReviewSnippets_GroundTruth.txt")
SEARCH_DEPTH = 3
"""A data directory is searched this many folders down for MOVIE_REVIEWS_FILES, not walked
whole (`--data-dir /tmp` read all of /tmp)."""


def _movie_reviews_text(path):
    path = pathlib.Path(path)
    if path.is_dir():
        found = next((hit for level in range(SEARCH_DEPTH + 1) for name in MOVIE_REVIEWS_FILES
                      for hit in sorted(path.glob("/".join(["*"] * level + [name])))), None)
        if found is None:
            raise DataError(f"{path}: no {' or '.join(MOVIE_REVIEWS_FILES)} in it or up to "
                            f"{SEARCH_DEPTH} folders below.")
        path = found
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as archive:
            member = archive.extractfile(MOVIE_REVIEWS_MEMBER)
            return f"{path}!{MOVIE_REVIEWS_MEMBER}", member.read().decode("utf-8")
    return str(path), path.read_bytes().decode("utf-8")


def read_movie_reviews(path):
    """(id, sentence, mean score) rows of movieReviewSnippets_GroundTruth.txt: tab-separated
    id, score in [-4, 4], text. `path` is the file, the ICWSM tarball, or a directory holding
    either (e.g. `kbert.data.sources.fetch("sentiment")`)."""
    name, text = _movie_reviews_text(path)
    rows = []
    for line, raw in enumerate(io.StringIO(text, newline=None), start=1):
        raw = raw.rstrip("\n")
        if not raw.strip():
            continue
        fields = raw.split("\t")
        if len(fields) != 3:
            fail(name, line, f"expected 3 tab-separated fields (id, score, text), "
                              f"got {len(fields)}.")
        ident, score, sentence = fields
        score = parse_label(name, line, score, None, True, "score")
        rows.append((ident.strip(), check_text(name, line, sentence.strip(), "text"), score))
    return rows


def sentiment_task(path=None, regression=False):
    """Binary sentiment from the movie-review snippets: mean score > 0 → positive (1), < 0 →
    negative (0), exactly 0 dropped (37 sentences). `regression=True` keeps every sentence
    with its mean score as the target. Split by `split_of(snippet id)` (≈ 80/10/10)."""
    if path is None:
        from kbert.data.sources import fetch

        path = fetch("sentiment")
    splits = {"train": [], "dev": [], "test": []}
    for ident, sentence, score in read_movie_reviews(path):
        if regression:
            label = score
        elif score == 0:
            continue
        else:
            label = int(score > 0)
        splits[split_of(ident)].append((sentence, label))
    if regression:
        return TaskData("sentiment_score", "regression", 1, splits,
                        description="movie-review snippets, mean human score in [-4, 4]")
    return TaskData("sentiment", "classification", 2, splits, ("negative", "positive"),
                    "movie-review snippets, positive iff mean human score > 0")
