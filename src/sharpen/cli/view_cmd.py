"""``sharpen view``: serve the viewer over a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sharpen.cli.options import StoreOpt, open_store
from sharpen.core.errors import UserError


def view(
    store: StoreOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind. Anything but loopback needs a token.")] = (
        "127.0.0.1"),
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8321,
    token: Annotated[str | None, typer.Option(
        envvar="SHARPEN_VIEW_TOKEN",
        help="Access token every request must carry (generated for a non-local --host).")] = None,
    improve_dir: Annotated[Path | None, typer.Option(
        help="Folder of improvement experiments (default: improve/ next to a SQLite store, "
             "where `sharpen improve` writes them).")] = None,
    train_dir: Annotated[Path | None, typer.Option(
        help="Folder of trainings (default: train/ next to a SQLite store, where `sharpen train` "
             "writes them).")] = None,
) -> None:
    """Browse runs and trajectories, annotate them, compare runs and inspect improvement
    experiments and trainings in the browser."""
    try:
        import uvicorn

        from sharpen.viewer import create_app
        from sharpen.viewer.security import LOCAL_HOSTS, is_local, resolve_token
    except ImportError as exc:
        raise UserError(f"the viewer needs {exc.name or 'its dependencies'}",
                        "pip install 'sharpen[viewer]'") from None
    st = open_store(store)
    secret, generated = resolve_token(host, token)
    allowed = LOCAL_HOSTS if is_local(host) and secret is None else None
    app = create_app(st, token=secret, allowed_hosts=allowed, improve_dir=improve_dir,
                     train_dir=train_dir)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={secret}" if secret else "")
    console = Console(stderr=True)
    console.print(f"sharpen viewer on {st.url}", highlight=False)
    if generated:
        console.print("[bold]--host is not loopback: generated an access token[/]", highlight=False)
    console.print(f"open [bold]{url}[/]   (Ctrl-C stops)", highlight=False)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        st.close()
