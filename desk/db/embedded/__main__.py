"""`python -m desk.db.embedded --data-dir D --socket S`: the server child the launcher starts."""

from desk.db.embedded.server import serve

if __name__ == "__main__":  # pragma: no cover - runs in the child
    serve()
