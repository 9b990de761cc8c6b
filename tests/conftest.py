"""pytest configuration for fibre's Python tests: makes `binaries` (where the programs are)
and the helper modules of tests/differential (gen, kernelns, run) and tests/scenarios
(scenario) importable."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "differential"))
sys.path.insert(0, os.path.join(HERE, "scenarios"))
