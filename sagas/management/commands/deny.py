"""`semantic-saga deny ID [--by NAME]`: deny a held proxied call; its agent is told it did not run."""

from __future__ import annotations

from sagas.management.held_calls_cli import DecisionCommand


class Command(DecisionCommand):
    help = "Deny a proxied call held for confirmation (see `semantic-saga pending`); nothing is sent."
    approved = False
