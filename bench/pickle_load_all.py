#!/usr/bin/env python3
"""The baseline of `bench/scale.sh`'s snapshot folder: `pickle.load` of every file of a folder,
one after another in one process, printing how many entries each top-level object holds (so the
work is not optimised away). Usage: pickle_load_all.py DIR"""

import os
import pickle
import sys

folder = sys.argv[1]
total = 0
for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as f:
        snapshot = pickle.load(f)
    total += len(snapshot.get("segments", ())) if isinstance(snapshot, dict) else 1
print(total)
