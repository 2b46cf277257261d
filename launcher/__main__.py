"""`python -m launcher`: the local stack (see launcher/stack.py)."""
import sys

from launcher.stack import main

sys.exit(main())
