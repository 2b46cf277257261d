"""`python -m classifier.datagen [--out DIR] [--seed N]`: regenerate the committed dataset."""
import argparse
import json
from pathlib import Path

from .generate import write

parser = argparse.ArgumentParser(prog="python -m classifier.datagen")
parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data"))
parser.add_argument("--seed", type=int, default=20261123)
args = parser.parse_args()
print(json.dumps(write(Path(args.out), args.seed)))
