"""sharpen.interop: other tools' logs read into the store and runs written in their formats.

- :mod:`sharpen.interop.inspect_log` — Inspect AI logs (``.eval`` / ``.json``) imported as runs;
- :mod:`sharpen.interop.inspect_export` — a run written as an Inspect log (``inspect view``);
- :mod:`sharpen.interop.inspect_messages` — the message and step mapping both share;
- :mod:`sharpen.interop.otel_spans` — a run as OpenTelemetry GenAI / OpenInference spans;
- :mod:`sharpen.interop.otlp` — those spans sent over OTLP/HTTP (export, and live ``--otlp``);
- :mod:`sharpen.interop.otel_json` — spans from OTLP/JSON files and Phoenix's REST API;
- :mod:`sharpen.interop.otel_import` — spans back into the store as runs;
- :mod:`sharpen.interop.phoenix_annotations` — outcomes and feedback as Phoenix annotations.

Each needs its tool's package (``pip install 'sharpen[inspect]'``; ``'sharpen[otel]'`` for
sending spans); nothing here is imported unless a command uses it.
"""
