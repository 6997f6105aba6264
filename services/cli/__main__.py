"""``python -m services.cli``."""

from services.cli import main

main()
