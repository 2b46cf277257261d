"""The gateway's serving path must not pull in scikit-learn (or torch)."""
import json
import subprocess
import sys

CODE = """
import json, sys
from classifier.runtime import ComplexityClassifier
clf = ComplexityClassifier.load()
pred = clf.predict(prompt="hello there")
print(json.dumps({"tier": pred.tier, "mods": sorted(m for m in sys.modules
      if m.split('.')[0] in ('sklearn', 'skl2onnx', 'scipy', 'torch', 'transformers'))}))
"""


def test_runtime_does_not_import_sklearn():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True, timeout=60)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tier"] in (1, 2, 3, 4)
    assert result["mods"] == []
