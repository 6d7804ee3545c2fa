"""`python -m anyattn.report`: see anyattn/report/cli.py, or run it with --help."""
import sys

from .cli import main

sys.exit(main())
