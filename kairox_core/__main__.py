"""``python -m kairox_core`` runs the ``kairox`` CLI."""

from kairox_core.cli import main

main()
