#!/usr/bin/env python
"""Django's command-line utility; `semantic-saga` is the same with the package installed."""

from saga_project.cli import main

if __name__ == "__main__":
    main()
