"""Write config/README.md, every config key with its type, default and description, from the
config schema and the embedded default (run from the repository: `python
workflow/scripts/make_config_doc.py --out config/README.md`; tests/experiments/
test_config_doc.py fails while the page is out of date)."""

import argparse
from pathlib import Path

from fedrepro.experiments.config_doc import render

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--out", type=Path, required=True, help="the page (config/README.md)")
a = p.parse_args()
a.out.write_text(render(Path.cwd()))
print(a.out)
