"""`semantic-saga approve ID [--by NAME]`: approve a held proxied call; the proxy then forwards it."""

from __future__ import annotations

from sagas.management.held_calls_cli import DecisionCommand


class Command(DecisionCommand):
    help = "Approve a proxied call held for confirmation (see `semantic-saga pending`); its proxy then forwards it."
    approved = True
