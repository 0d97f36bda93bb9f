"""``python -m faultline`` runs the CLI."""

from faultline.cli import main

main()
