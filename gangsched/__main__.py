"""Allows ``python -m gangsched``."""

from gangsched.cli import main

main()
