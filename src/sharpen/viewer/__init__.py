"""``sharpen view``: a server-rendered browser UI over the store (FastAPI + Jinja + HTMX).

Install with ``pip install 'sharpen[viewer]'``. :func:`create_app` builds the app for a
Store (tests serve it with uvicorn or call it through ``TestClient``).
"""

from sharpen.viewer.app import create_app

__all__ = ["create_app"]
