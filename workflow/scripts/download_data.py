"""Fetch (or verify pre-staged) raw files of one dataset, then touch a flag file."""

import argparse
import sys
from pathlib import Path

from fedrepro.checksums import ChecksumError
from fedrepro.data.sources.download import DownloadError, download

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--dataset", required=True, help="registry key, e.g. cifar10")
p.add_argument("--data-root", type=Path, required=True, help="raw files go to <root>/<dataset>/")
p.add_argument("--out-flag", type=Path, required=True, help="touched once every file verified")
a = p.parse_args()
try:
    print("\n".join(map(str, download(a.dataset, a.data_root))))
except (DownloadError, ChecksumError, FileNotFoundError, ValueError) as err:
    sys.exit(f"fedrepro download error ({type(err).__name__}): {err}")  # one line
a.out_flag.parent.mkdir(parents=True, exist_ok=True)
a.out_flag.touch()
