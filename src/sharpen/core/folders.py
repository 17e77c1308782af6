"""Reading back the folders long jobs leave on disk (``sharpen improve``'s experiments,
``sharpen train``'s trainings): JSON files read as pydantic models without raising for a
damaged folder, and a folder picked by its id or a unique prefix of it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from sharpen.core.errors import UserError

M = TypeVar("M", bound=BaseModel)


def beside_store(store_url: str, name: str) -> Path:
    """``name/`` next to the file of a SQLite store at ``store_url``, else ``.sharpen/name``
    (where a job keeps its folders by default)."""
    path = store_url.removeprefix("sqlite:///") if store_url.startswith("sqlite:///") else None
    return (Path(path).parent if path else Path(".sharpen")) / name


class FolderReader:
    """Reads the files of one folder, keeping what could not be read (``problems``, one line
    each: the file and the first line of why) and when any file last changed (``updated``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []
        self._times = [path.stat().st_mtime]

    def load(self, file: Path, model: type[M]) -> M | None:
        """``file`` as ``model``; ``None`` when it is missing or unreadable (then named in
        :attr:`problems`)."""
        if not file.is_file():
            return None
        self._times.append(file.stat().st_mtime)
        try:
            return model.model_validate_json(file.read_text())
        except (OSError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            self.problems.append(f"{file.relative_to(self.path)}: {first}")
            return None

    @property
    def updated(self) -> datetime:
        """The newest modification time of the folder and every file loaded so far."""
        return datetime.fromtimestamp(max(self._times), tz=UTC)


def pick_folder(folders: list[Path], ref: str, *, kind: str, base: Path, fix: str) -> Path:
    """The folder among ``folders`` named ``ref`` or, failing that, the only one whose name
    starts with it; a UserError when none (``fix`` says where to find one) or several match.
    ``kind`` names what the folders hold in the message (``experiment``, ``training``)."""
    matches = [p for p in folders if ref and p.name.startswith(ref)]
    exact = [p for p in matches if p.name == ref]
    if exact or len(matches) == 1:
        return (exact or matches)[0]
    if not matches:
        raise UserError(f"no {kind} {ref!r} under {base}", fix)
    raise UserError(f"{kind} prefix {ref!r} matches {len(matches)} {kind}s",
                    "give more characters of its id")
