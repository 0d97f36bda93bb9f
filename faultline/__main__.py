"""``python -m faultline`` runs the CLI."""

from faultline.launch import main

main()
