"""sharpen.interop: other tools' logs read into the store and runs written in their formats.

- :mod:`sharpen.interop.inspect_log` — Inspect AI logs (``.eval`` / ``.json``) imported as runs;
- :mod:`sharpen.interop.inspect_export` — a run written as an Inspect log (``inspect view``);
- :mod:`sharpen.interop.inspect_messages` — the message and step mapping both share.

Each needs its tool's package (``pip install 'sharpen[inspect]'``); nothing here is imported
unless a command uses it.
"""
